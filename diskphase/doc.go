// Package diskphase runs a job the way Hadoop MapReduce (and Spark's
// shuffle files) do: as a sequence of finite jobs, each in two phases, disk
// to disk. There is no running picture of the job at all:
//
//   - phase 1: one map unit per input split (source partition × the finite
//     job's range) applies the job's stateless steps, partitions its rows
//     by key group into --parallelism reduce partitions and materialises
//     one Parquet file per (unit, partition) in durable shared storage;
//   - phase 2: one reduce unit per partition restores the state the
//     previous finite job carried over (a Parquet table), reads its file
//     from every map unit, runs the keyed operator, and materialises its
//     output and its new state;
//   - the job commit writes the staged outputs through the sink under the
//     finite job's epoch and records a _SUCCESS marker.
//
// A ledger in durable storage records which units finished. A unit whose
// worker dies is re-run alone, on another worker when there is one; a
// materialised file found missing or corrupt sends only the unit that
// produced it back to work; a coordinator that crashes is replaced by one
// that rebuilds the plan and the ledger from storage and redoes nothing
// the ledger holds.
//
// The coordinator's logic is a pure state machine (machine.go): events in,
// actions out, no I/O, goroutines or clocks; restore() rebuilds it from
// what storage holds. coordinator.go is the I/O loop around it, units.go
// the work of one unit attempt, points.go the named crash points,
// table.go the Parquet encoding. See
// docs/diskphase.md for the storage layout, the crash points, the metrics
// and the measured costs.
package diskphase
