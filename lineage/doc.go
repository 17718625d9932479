// Package lineage is the recovery model of Spark's RDDs and D-Streams for
// the stateless part of a job: nothing is saved while the job runs; each
// piece of an intermediate dataset carries its recorded derivation, and a
// lost piece is rebuilt by running that derivation again, only that piece,
// spread over the surviving workers.
//
//   - Derivation (derivation.go) is the record of one piece: an input range
//     (input, partition, [start, end) positions) or parent pieces, the
//     ordered steps (job stages, each flagged Deterministic), the worker
//     that holds the piece, and whether a durable copy exists
//     (Materialised), which cuts the chain and bounds lineage depth.
//     Graph holds the derivations of a run, parents before children, and
//     round-trips through JSON.
//   - Plan (plan.go) is a pure function: given the lost workers, the pieces
//     downstream still needs and the survivors, it returns the minimal set
//     of pieces to rebuild, parents first, spread by load over the
//     survivors, and refuses steps that are not deterministic (a rebuilt
//     piece must equal the lost one byte for byte). PlanRerun is the
//     rerun-batch baseline: redo every piece.
//   - Rebuild (rebuild.go) executes a plan with one goroutine per survivor:
//     it re-reads each source-derived piece's range from a re-readable
//     source and pushes it through fresh operator instances of its steps,
//     and reports what it cost as a report.PieceLoss (pieces lost,
//     pieces rebuilt, records re-read, wall time).
//
// Executors: microbatch rebuilds a worker's lost pieces with Plan and
// Rebuild when the worker dies while a batch runs (--lost-piece-recovery
// lineage, the default; microbatch/lineage.go), and diskphase decides
// which map unit re-derives a lost or corrupt materialised file with Plan
// (diskphase/rebuild.go). See docs/lineage.md.
package lineage
