// Package microbatch serves an endless input as repeated small finite jobs.
// The seam after each batch is a moment with nothing in flight, so it is the
// recovery point: offsets for batch N are logged before it runs and its
// commit after, and state is versioned per batch. A crash re-runs the
// uncommitted batch from its logged offsets. The price is a latency floor of
// one trigger interval.
package microbatch
