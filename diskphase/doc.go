// Package diskphase runs a job as two phases, disk to disk: phase 1 writes
// Parquet files per (unit, partition), phase 2 reads them. There is no
// running picture: a ledger records finished units and a failed unit re-runs
// alone from its input split or from the materialised files.
package diskphase
