// Package bench runs the same job under every executor with the same fault
// schedule and compares latency, throughput, checkpoint metrics and the
// recovery bill. Not implemented yet: issues #3 to #6 fill it in as the
// executors land.
package bench
