// Package bench runs one scenario defined in time under several executors
// and puts side by side what each recovery model costs: a live input at a
// fixed rate for a fixed duration, a worker killed at the same moment for
// every contestant, repeated with the moment shifted across one cadence
// (checkpoint interval, trigger, finite-job interval) so the cost is
// sampled over the whole cycle.
//
// Steady-state figures (throughput, latency percentiles from merged
// histograms, checkpoint duration) come from the run's own time series
// between the warmup and the fault; the recovery bill from its recoveries.
// Every run is also checked: its resolved output is compared with the
// reference executor's over the same input, so a fast but wrong
// contestant is reported as wrong, not as fast.
//
// results.go is the contract the writers, compare and sweeps read.
package bench
