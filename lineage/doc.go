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
// # Calling convention
//
// The other protocol cores of the repository (recordwise/barrier,
// recordwise/checkpoint, the microbatch and diskphase machines) are state
// machines driven through Step(Input) []Action. Plan is not one, and keeps
// its signature: it holds no state between calls and has no sequence of
// events to react to, so there is nothing to step. A caller builds the
// graph, calls Plan once per failure, logs the RebuildPlan (a plain value)
// and executes it:
//
//	plan, err := lineage.Plan(g, dead, needed, alive)
//	if err != nil {
//		// refused: a non-deterministic step, or no survivor; fall back
//		// to a coarser recovery
//	}
//	res, err := lineage.Rebuild(ctx, plan, env)
//
// The scripts in testdata/ (run by TestPlanDataDriven) walk through
// planning the rebuild of a lost piece.
//
// Executors: microbatch rebuilds a worker's lost pieces with Plan and
// Rebuild when the worker dies while a batch runs (--lost-piece-recovery
// lineage, the default; microbatch/lineage.go), and diskphase decides
// which map unit re-derives a lost or corrupt materialised file with Plan
// (diskphase/rebuild.go). See docs/lineage.md.
package lineage
