// Package dataflow is the home of everything the executors share: the job
// model (job), the Arrow operator set (operator), key groups (keygroup), the
// state snapshot format (state), sources, sinks, durable storage, crash
// injection (fault), the run configuration and driver (run), what a run
// reports (report), the run record a --resume checks (runrecord), an output directory's own
// bookkeeping (outdir), the recovery-point listing of `rewind inspect`
// (inspect) and the oracle (oracle).
//
// runtest is test support for whole executor runs (the output check against
// the oracle, an independent duplicate counter, RAM-disk directories); only
// _test.go files import it.
//
// An executor (microbatch, diskphase, recordwise) is a scheduler plus a
// recovery protocol wrapped around these pieces. Executors import dataflow
// packages; they never import each other, and nothing in dataflow imports an
// executor.
package dataflow
