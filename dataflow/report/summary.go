package report

import (
	"encoding/json"
	"fmt"
	"io"
)

// Summary is the machine-readable result of a run (`--summary json`). Fields
// an executor cannot fill are null, never zero, so a reader can tell "none"
// from "not measured".
type Summary struct {
	Job          string            `json:"job"`
	Executor     string            `json:"executor"`
	Barriers     *string           `json:"barriers"`
	SinkMode     string            `json:"sink_mode"`
	OutputFormat string            `json:"output_format"`
	Inputs       map[string]string `json:"inputs"`
	Output       string            `json:"output"`
	Parallelism  int               `json:"parallelism"`
	// RunID is the run's namespace in durable storage, the value that
	// `rewind run --resume` takes; null for the reference executor, which
	// keeps nothing there.
	RunID *string `json:"run_id"`
	// Resumed says this process continued a run whose earlier process
	// died (--resume). Its counts cover this process only. The earlier
	// process's death is billed as a crash: Recoveries[0] has the cause
	// CauseProcessDied and only a restore time, as what the earlier process
	// read after its newest recovery point, and when it died, are not
	// known here.
	Resumed bool `json:"resumed"`
	// ResumedFrom is the recovery point a resumed process restored at its
	// start; null when the run was not resumed.
	ResumedFrom *ResumedFrom `json:"resumed_from"`

	// RecordsIn counts input records read, replays included.
	RecordsIn int64 `json:"records_in"`
	// RowsOut counts rows handed to the sink, replays included.
	RowsOut int64 `json:"rows_out"`
	// VisibleRows and ResolvedRows describe the output directory after the
	// run: rows in visible files, and rows after resolution.
	VisibleRows  int64 `json:"visible_rows"`
	ResolvedRows int64 `json:"resolved_rows"`
	// SinkDuplicateRows is the number of extra copies among visible rows
	// equal in every column (sink.Stats.DuplicateRows); rows that share
	// write key and _version but differ elsewhere are SinkConflictingRows.
	SinkDuplicateRows int64 `json:"sink_duplicate_rows"`
	// SinkConflictingRows counts visible rows sharing write key and
	// _version with another row but not its values. With an append sink a
	// replay that merges its input channels in another order produces them
	// (keyed-count's version 7 of a key may sum other records); with the
	// idempotent and transactional sinks they would be a bug.
	SinkConflictingRows int64 `json:"sink_conflicting_rows"`
	// LostRecords is what a forgetful source could not give back after a
	// crash. Non-zero means the result is knowingly incomplete.
	LostRecords int64 `json:"lost_records"`
	LateRows    int64 `json:"late_rows"`

	// LostPieces is what recovering lost stateless pieces cost; null for
	// executors that have no such pieces (lineage, issue #6).
	LostPieces *LostPieces `json:"lost_pieces"`

	// Interrupted: the run was stopped (SIGINT, SIGTERM, a cancelled
	// context) before its input ended; the counts are of the part that ran.
	Interrupted bool `json:"interrupted"`
	Crashes     int  `json:"crashes"`
	// UnfiredFaults are the --fail crashes the run never reached (the input
	// ended first), so that a run asked to crash is not taken for a
	// crash-free one that recovered well.
	UnfiredFaults []string     `json:"unfired_faults"`
	Recoveries    []Recovery   `json:"recoveries"`
	Checkpoints   *Checkpoints `json:"checkpoints"`
	LatencyMs     *Latency     `json:"latency_ms"`

	// History is the run's progress events folded in: counts per kind and
	// the newest few of each (per batch, per checkpoint, per finite job).
	History *ProgressHistory `json:"history"`

	// Series is the run over time when run.Config.Series asked for it;
	// rewind bench writes it to its own files, so not to the summary.
	Series *Series `json:"-"`

	ThroughputRPS float64 `json:"throughput_rps"`
	WallMs        float64 `json:"wall_ms"`
	// Workers counts a run's worker processes (--workers process); null
	// when its workers ran in this process.
	Workers *WorkerProcesses `json:"workers"`
	// Notes are human-readable caveats ("source is forgetful: 1200 records
	// lost"), also printed by the text summary.
	Notes []string `json:"notes"`
}

// WorkerProcesses is what a run with worker processes counts of them.
type WorkerProcesses struct {
	// Started counts the processes the run started, replacements
	// included.
	Started int `json:"started"`
	// LinkRows are the rows that went straight from one worker process
	// to another over their own links, never through the coordinator (0
	// for an executor whose workers exchange nothing). A killed worker's
	// own count dies with it, so after a crash it is a lower bound.
	LinkRows int64 `json:"link_rows"`
}

// Recovery is the bill of one crash.
type Recovery struct {
	Cause string `json:"cause"`
	// AtMs is when the crash happened, ms since the run started.
	AtMs *float64 `json:"at_ms"`
	// DetectMs is fault to declared dead; AcquireMs is declared dead to a
	// replacement worker ready. Both are modelled (--detect-delay,
	// --acquire-delay) when Modelled says so.
	DetectMs  *float64 `json:"detect_ms"`
	AcquireMs *float64 `json:"acquire_ms"`
	// Modelled names the parts that are modelled delays, not measured
	// ("detect", "acquire").
	Modelled []string `json:"modelled"`
	// RestoreMs is the time to load the recovery point; RestoreBytes what
	// it read from storage.
	RestoreMs    *float64 `json:"restore_ms"`
	RestoreBytes *int64   `json:"restore_bytes"`
	// ReprocessedRecords are records read a second time; ReprocessMs the
	// time from restored until the read position was back where the
	// crash found it.
	ReprocessedRecords *int64   `json:"reprocessed_records"`
	ReprocessMs        *float64 `json:"reprocess_ms"`
	// CatchUpMs runs from restored until the source lag is back within
	// 10 % of its level before the fault; RecoveredMs from the fault to
	// then (time-to-recovered).
	CatchUpMs   *float64 `json:"catch_up_ms"`
	RecoveredMs *float64 `json:"recovered_ms"`
}

// ResumedFrom is where a resumed process picked the run up.
type ResumedFrom struct {
	// Kind is what the executor calls its recovery point, as in
	// inspect.RecoveryPoint.Kind: batch, checkpoint or finite job.
	Kind string `json:"kind"`
	// ID is the recovery point restored; null when storage held no
	// usable one and the run started over from the start of its input.
	ID *int64 `json:"id"`
	// RecordsBefore is the input the restored state covers, records this
	// process does not read: the sum over source partitions of the restored
	// read positions (microbatch: the offsets the newest committed batch
	// ended at; recordwise: the checkpoint's source positions; diskphase:
	// the records the finished map units in the ledger read, finite jobs
	// after the newest committed one included). Without a crash in this
	// process, RecordsIn + RecordsBefore is the input read once.
	RecordsBefore int64 `json:"records_before"`
}

// LostPieces are the figures of lost-piece recovery over a run. A piece is
// the output of the stateless steps for one input range, held by one
// worker (microbatch) or materialised in one file (diskphase).
type LostPieces struct {
	// Recovery is how lost pieces are recovered: lineage or rerun-batch.
	Recovery string `json:"recovery"`
	// Recoveries counts the losses that destroyed pieces.
	Recoveries int `json:"recoveries"`
	// PiecesLost counts pieces whose only copy was lost.
	PiecesLost int `json:"pieces_lost"`
	// PiecesRebuilt counts pieces derived again: with lineage the lost
	// ones, with rerun-batch every piece of the re-run batch.
	PiecesRebuilt int `json:"pieces_rebuilt"`
	// RecordsReread counts the input records fed through the stateless
	// steps again to get the pieces back.
	RecordsReread int64 `json:"records_reread"`
	// RebuildMs is the time spent deriving them again (null: none rebuilt).
	RebuildMs *float64 `json:"rebuild_ms"`
}

// Checkpoints counts recovery points (or committed batches / finished jobs).
type Checkpoints struct {
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
	Aborted   int `json:"aborted"`
}

// WriteJSON writes s as one JSON object on one line.
func (s *Summary) WriteJSON(w io.Writer) error {
	if s.Recoveries == nil {
		s.Recoveries = []Recovery{}
	}
	if s.Notes == nil {
		s.Notes = []string{}
	}
	if s.UnfiredFaults == nil {
		s.UnfiredFaults = []string{}
	}
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
