package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/inspect"
	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/outdir"
	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/runrecord"
	"github.com/rewind-engine/rewind/dataflow/sink"
	"github.com/rewind-engine/rewind/dataflow/storage"
)

type runFlags struct {
	job, executor, barriers      string
	alignmentTimeout             time.Duration
	inputs                       []string
	output, outputFormat         string
	sinkMode, storage, s3        string
	parallelism                  int
	checkpointInterval, trigger  time.Duration
	window, joinWindow, disorder time.Duration
	fails                        []string
	seed                         int64
	summary, progress            string
	overwrite, listFailPoints    bool
	verbose                      bool
	maxBatchRecords, jobRecords  int64
	retainedBatches, retainedCPs int
	bufferTimeout, cpTimeout     time.Duration
	storageTimeout               time.Duration
	detectDelay, acquireDelay    time.Duration
	jobInterval                  time.Duration
	sinkThrottle                 float64
	rollAge                      time.Duration
	rollSize                     string
	lostPieceRecovery            string
	resume                       string
	resolveMemory                string
	series                       string
	memoryLimit                  string
	workers                      string
	listen                       string
	workerLaunch                 string
	heartbeatInterval            time.Duration
	heartbeatTimeout             time.Duration
	// noFails: --fail none, no crash (bench and trace have a default one;
	// for run it is the default).
	noFails bool
	// killsProcess: --fail may take kill=process, because this command is
	// one a dead process can be resumed from (rewind run).
	killsProcess bool
}

// resumeRecorded is --resume given without a value: continue the run
// recorded in the output directory. It cannot be a run id.
const resumeRecorded = "@output"

func newRunCmd(stdout, stderr io.Writer) *cobra.Command {
	f := &runFlags{killsProcess: true}
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Run one job under one executor",
		Example: `  rewind run                                   # keyed-count on 1M generated records
  rewind run --job windowed-sum --window 500ms --summary json
  rewind run --job join --input orders=gen:records=5000,seed=1 --input payments=gen:records=5000,seed=2
  rewind run --job etl --input file:./data --output out --output-format csv
  rewind run --executor microbatch --resume    # continue the run whose output is in rewind-out`,
		Args: f.resumeArg,
		RunE: func(cmd *cobra.Command, _ []string) error { return f.run(cmd, stdout, stderr) },
	}
	fl := cmd.Flags()
	fl.StringVar(&f.executor, "executor", defaultExecutor, "recovery model: "+strings.Join(executorNames(), ", ")+" (reference is the failure-free oracle)")
	fl.StringVar(&f.barriers, "barriers", "aligned", "recordwise barrier handling: aligned, unaligned")
	fl.StringVar(&f.output, "output", "rewind-out", "output directory")
	fl.StringArrayVar(&f.fails, "fail", nil, "inject a crash: worker=W,after-records=N|at=DURATION|at-point=NAME[,occurrence=K][,after-point=NAME] or point=NAME[,worker=W][,occurrence=K][,kill=process] (repeatable), or none (the default); at-point kills worker W at its own K-th arrival at the point (or the coordinator's, at a coordinator point), counting arrivals after after-point only; after-point holds a kill back until that point is reached, and fires it there if its records are read already; kill=process kills the whole process there, as SIGKILL would, for --resume to continue (see --list-fail-points)")
	fl.StringVar(&f.summary, "summary", "text", "summary format: text, json (json is the last line of stdout)")
	fl.StringVar(&f.progress, "progress", progressAuto, "progress on stderr: bar, json (each progress event as a line), none; auto = a bar when stderr is a terminal")
	fl.BoolVar(&f.overwrite, "overwrite", false, "clear a non-empty output directory first")
	fl.BoolVar(&f.listFailPoints, "list-fail-points", false, "list the named crash points of --executor and exit")
	fl.StringVar(&f.resume, "resume", "", "continue run `RUN_ID` after its process died: same flags, same --output and --storage; without a value, the run recorded in --output")
	fl.Lookup("resume").NoOptDefVal = resumeRecorded
	fl.BoolVarP(&f.verbose, "verbose", "v", false, "log progress details to stderr")
	addWorkerLaunchFlags(fl, f)
	fl.StringVar(&f.series, "series", "", "write the run over time (per-bucket counts and latency, recovery points with their durations, crash phases) as JSON to `FILE`")
	fl.StringVar(&f.resolveMemory, "resolve-memory", "32MiB", "rows held in memory while the finished output is counted; beyond it sorted runs spill to $TMPDIR (as rewind resolve --max-memory)")
	fl.StringVar(&f.memoryLimit, "memory-limit", "", "soft limit on the process's memory, as GOMEMLIMIT (such as 256MiB): the collector works harder near it; the run goes on past it if its state needs more (default: GOMEMLIMIT, or none)")
	f.addJobFlags(fl)
	return cmd
}

// addJobFlags registers the flags that describe the job and how executors
// run it; `rewind run` and `rewind bench` share them.
func (f *runFlags) addJobFlags(fl *pflag.FlagSet) {
	fl.StringVar(&f.job, "job", "keyed-count", "built-in job: "+strings.Join(job.Names(), ", "))
	fl.DurationVar(&f.alignmentTimeout, "alignment-timeout", 0, "recordwise: switch a checkpoint to unaligned after aligning this long (0 = never)")
	fl.StringArrayVar(&f.inputs, "input", nil, "input source SPEC, or NAME=SPEC for jobs with several inputs (gen:…, file:PATH, push:…); default: generated")
	fl.StringVar(&f.outputFormat, "output-format", "parquet", "output file format: parquet, csv")
	fl.StringVar(&f.sinkMode, "sink-mode", "append", "delivery contract: append, idempotent, transactional")
	fl.Float64Var(&f.sinkThrottle, "sink-throttle", 0, "`ROWS/S`: the sink takes at most this many rows a second, shared by every writer, as a slow destination would (0 = unthrottled)")
	fl.DurationVar(&f.rollAge, "roll-age", sink.DefaultRollPolicy.Age, "append: a writer's in-progress file (its tail, visible from each flush) is rewritten as a visible data file once its first rows are this old (0 = each flush is its own visible file, no tails)")
	fl.StringVar(&f.rollSize, "roll-size", defaultRollSize(), "append: an in-progress file also rolls once it holds this many bytes, 8 a value (0 = no size limit)")
	fl.StringVar(&f.storage, "storage", "file://./rewind-data", "durable shared storage: file://DIR, a bare DIR, or s3://bucket/prefix")
	fl.StringVar(&f.s3, "s3-endpoint", "", "S3 endpoint URL (default $REWIND_S3_ENDPOINT)")
	fl.DurationVar(&f.storageTimeout, "storage-timeout", storage.DefaultCallTimeout, fmt.Sprintf("S3: a storage call making no progress this long fails; the run waits for storage that stopped answering up to %dx this, then fails", storage.OutageCalls))
	fl.IntVar(&f.parallelism, "parallelism", 2, "subtasks per stage (1..128)")
	fl.DurationVar(&f.checkpointInterval, "checkpoint-interval", time.Second, "recordwise: time between recovery points")
	fl.DurationVar(&f.trigger, "trigger", 100*time.Millisecond, "microbatch: trigger interval; 0 runs batches back to back, each planned as soon as the one before it is sealed (an idle source is polled every 10ms)")
	fl.Int64Var(&f.maxBatchRecords, "max-batch-records", 0, "microbatch: cap on records per batch (0 = no cap)")
	fl.IntVar(&f.retainedBatches, "retained-batches", 10, "microbatch: offset/commit log entries and state versions kept")
	fl.DurationVar(&f.bufferTimeout, "buffer-timeout", time.Millisecond, "recordwise: flush a network buffer after this long even if not full")
	fl.DurationVar(&f.cpTimeout, "checkpoint-timeout", 10*time.Minute, "recordwise: abort a recovery point not complete after this long")
	fl.IntVar(&f.retainedCPs, "retained-checkpoints", 2, "recordwise: complete recovery points kept")
	fl.DurationVar(&f.detectDelay, "detect-delay", 0, "modelled heartbeat timeout: a dead worker is declared dead this long after it died (0 = not modelled: detection is measured)")
	fl.DurationVar(&f.acquireDelay, "acquire-delay", 0, "modelled time to obtain a replacement worker once one is declared dead (0 = none)")
	fl.Int64Var(&f.jobRecords, "job-records", 0, "diskphase: input records per finite job (0 = the whole bounded input)")
	fl.DurationVar(&f.jobInterval, "job-interval", 0, "diskphase: input time range per finite job (0 = unset)")
	// No default value: microbatch's default depends on --workers.
	fl.StringVar(&f.lostPieceRecovery, "lost-piece-recovery", "", "microbatch and diskphase: how a lost stateless piece is recovered: lineage (rebuild only the lost pieces from their recorded derivation; the default), rerun-batch (re-run the whole batch or unit; microbatch's only one, and its default, with --workers process)")
	fl.DurationVar(&f.window, "window", time.Second, "windowed-sum: tumbling window size")
	fl.DurationVar(&f.joinWindow, "join-window", 10*time.Second, "join: max |orders.ts - payments.ts|")
	fl.DurationVar(&f.disorder, "max-disorder", 0, "how far event time may go backwards within a partition")
	fl.Int64Var(&f.seed, "seed", 1, "seed for generated inputs and random fault schedules")
	addWorkerFlags(fl, f)
}

func millis(d time.Duration) int64 { return d.Milliseconds() }

// config validates the flags into a run.Config. Every problem is a
// usageError naming the flag and what is allowed. A nil exec skips the
// checks of --fail against one executor.
func (f *runFlags) config(exec run.Executor) (run.Config, *job.Job, error) {
	var cfg run.Config
	var err error
	if !slices.Contains(job.Names(), f.job) {
		return cfg, nil, usagef("invalid --job %q: allowed are %s", f.job, strings.Join(job.Names(), ", "))
	}
	if f.barriers != "aligned" && f.barriers != "unaligned" {
		return cfg, nil, usagef("invalid --barriers %q: allowed are aligned, unaligned", f.barriers)
	}
	if f.parallelism < 1 || f.parallelism > 128 {
		return cfg, nil, usagef("invalid --parallelism %d: allowed is 1..128 (keyed state has 128 key groups)", f.parallelism)
	}
	for name, d := range map[string]time.Duration{"--checkpoint-interval": f.checkpointInterval, "--window": f.window} {
		if d <= 0 {
			return cfg, nil, usagef("invalid %s %s: must be positive", name, d)
		}
	}
	if f.trigger < 0 {
		return cfg, nil, usagef("invalid --trigger %s: must not be negative (0 runs batches back to back)", f.trigger)
	}
	for name, d := range map[string]time.Duration{"--alignment-timeout": f.alignmentTimeout, "--join-window": f.joinWindow, "--max-disorder": f.disorder} {
		if d < 0 {
			return cfg, nil, usagef("invalid %s %s: must not be negative", name, d)
		}
	}
	if f.window%time.Millisecond != 0 || f.joinWindow%time.Millisecond != 0 || f.disorder%time.Millisecond != 0 {
		return cfg, nil, usagef("--window, --join-window and --max-disorder are event-time milliseconds: use whole milliseconds")
	}
	if f.maxBatchRecords < 0 || f.jobRecords < 0 {
		return cfg, nil, usagef("--max-batch-records and --job-records must not be negative")
	}
	if f.retainedBatches < 1 || f.retainedCPs < 1 {
		return cfg, nil, usagef("--retained-batches and --retained-checkpoints must be at least 1")
	}
	for name, d := range map[string]time.Duration{"--buffer-timeout": f.bufferTimeout, "--detect-delay": f.detectDelay, "--acquire-delay": f.acquireDelay, "--job-interval": f.jobInterval} {
		if d < 0 {
			return cfg, nil, usagef("invalid %s %s: must not be negative", name, d)
		}
	}
	if !(f.sinkThrottle >= 0) || math.IsInf(f.sinkThrottle, 0) {
		return cfg, nil, usagef("invalid --sink-throttle %v: rows per second, 0 (unthrottled) or more", f.sinkThrottle)
	}
	roll, err := f.rollPolicy()
	if err != nil {
		return cfg, nil, err
	}
	if f.cpTimeout <= 0 {
		return cfg, nil, usagef("invalid --checkpoint-timeout %s: must be positive", f.cpTimeout)
	}
	if f.storageTimeout <= 0 {
		return cfg, nil, usagef("invalid --storage-timeout %s: must be positive", f.storageTimeout)
	}
	if f.lostPieceRecovery != "" && f.lostPieceRecovery != "lineage" && f.lostPieceRecovery != "rerun-batch" {
		return cfg, nil, usagef("invalid --lost-piece-recovery %q: allowed are lineage, rerun-batch", f.lostPieceRecovery)
	}
	if f.summary != "text" && f.summary != "json" {
		return cfg, nil, usagef("invalid --summary %q: allowed are text, json", f.summary)
	}
	switch f.progress {
	case "", progressAuto, progressBar, progressJSON, progressNone:
	default:
		return cfg, nil, usagef("invalid --progress %q: allowed are auto, bar, json, none", f.progress)
	}
	if err := storage.CheckURL(f.storage); err != nil {
		return cfg, nil, usageError{fmt.Errorf("invalid --storage: %w", err)}
	}
	if err := checkS3Endpoint(f.storage, f.s3); err != nil {
		return cfg, nil, err
	}
	var resolveMemory int64
	if f.resolveMemory != "" { // rewind run's only
		b, err := parseSize("--resolve-memory", f.resolveMemory)
		if err != nil {
			return cfg, nil, err
		}
		resolveMemory = b
	}
	if f.output == "" {
		return cfg, nil, usagef("invalid --output: must name a directory")
	}
	if fi, err := os.Stat(f.output); err == nil && !fi.IsDir() {
		return cfg, nil, usagef("invalid --output %s: exists and is not a directory", f.output)
	}
	cfg = run.Config{
		Job: f.job, Executor: f.executor,
		Output: f.output, Storage: f.storage, S3Endpoint: f.s3, StorageTimeout: f.storageTimeout, Parallelism: f.parallelism,
		Seed: f.seed, DetectDelay: f.detectDelay, AcquireDelay: f.acquireDelay, SinkRowsPerSecond: f.sinkThrottle, SinkRoll: roll,
		ResolveMemory: resolveMemory,
		Params:        job.Params{Window: millis(f.window), JoinWindow: millis(f.joinWindow), MaxDisorder: millis(f.disorder)},
	}
	if exec != nil { // bench sets each contestant's
		cfg.Options = f.options(exec)
	}
	// The parsers' errors start "invalid output format %q: …"; the flag
	// replaces that head.
	if cfg.OutputFormat, err = sink.ParseFormat(f.outputFormat); err != nil {
		_, allowed, _ := strings.Cut(err.Error(), ": ")
		return cfg, nil, usagef("invalid --output-format %q: %s", f.outputFormat, allowed)
	}
	if cfg.SinkMode, err = sink.ParseMode(f.sinkMode); err != nil {
		_, allowed, _ := strings.Cut(err.Error(), ": ")
		return cfg, nil, usagef("invalid --sink-mode %q: %s", f.sinkMode, allowed)
	}
	j, err := job.Build(cfg.Job, cfg.Params)
	if err != nil {
		return cfg, nil, usageError{err}
	}
	if cfg.Inputs, err = run.ParseInputs(j, f.inputs); err != nil {
		return cfg, nil, usageError{err}
	}
	if len(cfg.Inputs) == 0 {
		cfg.Inputs = run.DefaultInputs(cfg.Job, cfg.Seed)
	}
	f.noFails = false
	for _, text := range f.fails {
		if text == "none" {
			f.noFails = true
			continue
		}
		s, err := fault.Parse(text)
		if err != nil {
			return cfg, nil, usageError{err}
		}
		switch {
		case s.KillProcess && !f.killsProcess:
			return cfg, nil, usagef("invalid --fail %s: kill=process kills the whole process, which only rewind run does (rewind run --resume then continues the run)", text)
		case s.KillProcess && killProcess == nil:
			return cfg, nil, usagef("invalid --fail %s: kill=process is not supported on %s", text, runtime.GOOS)
		}
		cfg.Fails = append(cfg.Fails, s)
	}
	if f.noFails && len(cfg.Fails) > 0 {
		return cfg, nil, usagef("invalid --fail: none cannot be combined with other crashes")
	}
	if exec == nil { // rewind bench validates its fault schedule per contestant
		return cfg, j, nil
	}
	if len(cfg.Fails) > 0 && exec.Traits().Reference {
		return cfg, nil, usagef("invalid --fail: the reference executor is the failure-free oracle; choose another --executor to inject crashes")
	}
	if err := fault.Validate(cfg.Fails, exec.FailPoints(), exec.Workers(cfg)); err != nil {
		return cfg, nil, usageError{err}
	}
	return cfg, j, nil
}

func (f *runFlags) run(cmd *cobra.Command, stdout, stderr io.Writer) error {
	exec, ok := executors[f.executor]
	if !ok {
		return usagef("invalid --executor %q: allowed are %s", f.executor, strings.Join(executorNames(), ", "))
	}
	if err := checkExecutorFlags(cmd.Flags(), exec.Name()); err != nil {
		return err
	}
	if err := applyMemoryLimit(f.memoryLimit); err != nil {
		return err
	}
	if f.listFailPoints {
		points := exec.FailPoints()
		if len(points) == 0 {
			fmt.Fprintf(stdout, "executor %s has no named crash points\n", exec.Name())
			return nil
		}
		for _, p := range points {
			fmt.Fprintln(stdout, p)
		}
		// Every executor's run ends in the run driver, which has points
		// too. One name per line on stdout, for scripts; the caveat of the
		// run driver's on stderr.
		for _, p := range fault.RunPoints {
			fmt.Fprintln(stdout, p)
		}
		fmt.Fprintf(stderr, "rewind: %s: %s\n", strings.Join(fault.RunPoints, ", "), fault.ProcessOnly)
		return nil
	}
	cfg, _, err := f.config(exec)
	if err != nil {
		return err
	}
	if err := f.workerSettings(cmd.Flags(), &cfg); err != nil {
		return err
	}
	if cfg.Workers, err = f.workerMode(exec); err != nil {
		return err
	}
	if err := f.launchSettings(cmd.Flags(), cfg.Workers); err != nil {
		return err
	}
	level := slog.LevelWarn
	if f.verbose {
		level = slog.LevelInfo
	}
	logs := &logSwitch{out: stderr} // a progress bar holds them while it is drawn
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: level}))
	if f.progress == progressJSON {
		cfg.Progress = stderr
	}
	ctx := cmd.Context()
	policy := run.OutputRequireEmpty
	if cmd.Flags().Changed("resume") && f.resume == "" {
		return usagef("invalid --resume=: give a run id, or --resume alone for the run recorded in --output")
	}
	unlock, err := outdir.Lock(cfg.Output)
	if errors.Is(err, outdir.ErrLocked) {
		return usagef("output directory %s is in use by another rewind process (%s holds its lock): wait for it to end, or choose another --output", cfg.Output, outdir.LockName)
	}
	if err != nil {
		return err
	}
	defer unlock()
	var rec runrecord.Record // the output directory's, for runs that keep one
	switch {
	case f.resume != "":
		if rec, err = f.resumeRun(exec, &cfg); err != nil {
			return err
		}
		policy = run.OutputResume
	case f.overwrite:
		policy = run.OutputOverwrite
	}
	cfg.Series = f.series != ""
	reference := exec.Traits().Reference
	if cfg.RunID == "" && !reference {
		cfg.RunID = run.NewRunID()
	}
	env, err := run.Prepare(ctx, cfg, memory.NewGoAllocator(), log, !reference, policy)
	if err != nil {
		return err
	}
	defer env.Close()
	env.Faults.KillProcess = killProcess
	env.WorkerCommand = f.workerCommand(cfg)
	switch {
	case cfg.Resumed:
		if err := checkResumedStorage(ctx, exec, env, rec, stderr); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "rewind: resuming run %s from %s (if this process dies, resume with --resume %s)\n", cfg.RunID, env.Store.URL(), cfg.RunID)
		for _, sp := range cfg.Fails {
			if sp.KillProcess {
				// Occurrences count from this process's start.
				fmt.Fprintf(stderr, "rewind: warning: --fail %s applies to this process too and kills it again when reached; leave it out to let the run finish\n", sp)
			}
		}
	case cfg.RunID != "":
		// Written before any output, so a process that dies at any later
		// moment leaves a directory --resume can continue.
		rec = run.RecordOf(cfg, env.Store.URL(), s3Endpoint(cfg))
		if err := runrecord.Write(cfg.Output, rec); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "rewind: run %s (if this process dies, resume with --resume %s)\n", cfg.RunID, cfg.RunID)
	}
	// Marked before the first output row and cleared only once the output
	// is complete, so an output whose run failed, was interrupted or died
	// never looks whole.
	incomplete := outdir.Incomplete{RunID: cfg.RunID, Resumable: cfg.RunID != "" && rereadable(env),
		Reason: "the run is in progress; if no rewind process holds " + outdir.LockName + " any more, its process died"}
	if err := outdir.MarkIncomplete(cfg.Output, incomplete); err != nil {
		return err
	}
	log.Info("starting", "job", cfg.Job, "executor", exec.Name(), "inputs", cfg.Inputs, "output", cfg.Output)
	var bar *runProgress
	if !reference && (f.progress == progressBar || f.progress == progressAuto && isTerminal(stderr)) {
		bar = startProgress(stderr, logs, env)
	}
	s, err := run.Execute(ctx, exec, env)
	if bar != nil {
		bar.finish(err == nil && !s.Interrupted)
	}
	var ie run.InputError
	var re run.RefusedError
	if err != nil && !cfg.Resumed && (errors.As(err, &ie) || errors.As(err, &re)) {
		// Refused before the first row: there is no output to mark.
		if cerr := outdir.ClearIncomplete(cfg.Output); cerr != nil {
			return fmt.Errorf("%w (%v)", err, cerr)
		}
		return err
	}
	if err != nil {
		incomplete.Reason = err.Error()
		if merr := outdir.MarkIncomplete(cfg.Output, incomplete); merr != nil {
			return fmt.Errorf("%w (%v)", err, merr)
		}
		return fmt.Errorf("%w; the output in %s is incomplete (%s says why and what to do)", err, cfg.Output, outdir.IncompleteName)
	}
	interrupted := s.Interrupted
	if interrupted {
		incomplete.Reason = "interrupted (SIGINT or SIGTERM) before the run finished"
		if err := outdir.MarkIncomplete(cfg.Output, incomplete); err != nil {
			return err
		}
		s.Notes = append(s.Notes, fmt.Sprintf("the output is marked incomplete (%s)", outdir.IncompleteName))
	} else if err := outdir.ClearIncomplete(cfg.Output); err != nil {
		// Before the run record is marked finished: a death in between
		// leaves a run --resume completes again.
		return err
	}
	switch {
	case interrupted && cfg.RunID != "" && rereadable(env):
		s.Notes = append(s.Notes, fmt.Sprintf("interrupted: the same command with --resume %s (and without --overwrite or a kill=process --fail) continues from the newest recovery point", cfg.RunID))
	case interrupted:
		s.Notes = append(s.Notes, "interrupted: the output holds only what ran before the interrupt")
	case cfg.RunID != "":
		// A later --resume is refused instead of billing a death that
		// never happened.
		now := time.Now().UTC()
		rec.Finished = &now
		if err := runrecord.Write(cfg.Output, rec); err != nil {
			return err
		}
	}
	if err := writeSeries(f.series, s); err != nil {
		return err
	}
	write := s.WriteText
	if f.summary == "json" {
		write = s.WriteJSON
	}
	if err := write(stdout); err != nil {
		return err
	}
	if interrupted {
		// The summary is of the part that ran; the exit code tells a
		// script that the run did not finish.
		return errInterrupted
	}
	return nil
}

// rereadable reports whether every input of env can be read again, which
// --resume needs.
func rereadable(env *run.Env) bool {
	for _, s := range env.Sources {
		if !s.Rereadable() {
			return false
		}
	}
	return true
}

// errInterrupted ends a run stopped by SIGINT or SIGTERM after its summary
// is written; it unwraps to context.Canceled, so the exit code is 130.
var errInterrupted error = interruptedError{}

type interruptedError struct{}

func (interruptedError) Error() string {
	return "interrupted before the run finished (the summary above covers the part that ran)"
}
func (interruptedError) Unwrap() error { return context.Canceled }

// resumeArg takes the run id of "--resume RUN_ID": --resume may go without
// a value, so the flag parser leaves a value after a space as an argument.
// `run` takes no other argument.
func (f *runFlags) resumeArg(cmd *cobra.Command, args []string) error {
	if f.resume == resumeRecorded && len(args) == 1 {
		f.resume = args[0]
		return nil
	}
	return cobra.NoArgs(cmd, args)
}

// resumeRun checks --resume against the flags and the run record in
// cfg.Output, sets cfg.RunID and cfg.Resumed, and returns the record. A run resumes only into the directory it was
// writing, reading the same inputs: the rows it emitted before its newest
// recovery point are there and are not produced again.
func (f *runFlags) resumeRun(exec run.Executor, cfg *run.Config) (runrecord.Record, error) {
	var rec runrecord.Record
	if exec.Traits().Reference {
		return rec, usagef("invalid --resume: the reference executor keeps no recovery points; give the --executor the run used")
	}
	if f.overwrite {
		return rec, usagef("invalid --resume with --overwrite: resuming continues the output in %s, and clearing it would lose the rows written before the recovery point", cfg.Output)
	}
	for _, name := range slices.Sorted(maps.Keys(cfg.Inputs)) {
		if strings.HasPrefix(cfg.Inputs[name], "push:") {
			return rec, usagef("invalid --resume: input %s is a push source, which cannot be re-read, so what the stopped process had received is gone; start a new run", name)
		}
	}
	if f.resume != resumeRecorded && !runrecord.ValidID(f.resume) {
		return rec, usagef("invalid --resume %q: a run id has letters, digits, '_' and '-' only (the run prints its id when it starts; `rewind inspect` lists them)", f.resume)
	}
	rec, err := runrecord.Read(cfg.Output)
	switch {
	case errors.Is(err, runrecord.ErrNotFound):
		// An output directory that holds a run's files but no record lost
		// it (deleted, or never synced by a crashed writer): damage to
		// report, not a flag to change.
		if inUse, uerr := outdir.InUse(cfg.Output); uerr == nil && inUse {
			return rec, fmt.Errorf("run record %s is missing, yet %s holds a run's output: without the record the run cannot be resumed (it names the run and the flags it ran with); --overwrite starts a new run there",
				filepath.Join(cfg.Output, runrecord.FileName), cfg.Output)
		}
		return rec, usagef("invalid --resume: output directory %s holds no run record (%s); resume needs the --output the run was writing", cfg.Output, runrecord.FileName)
	case errors.Is(err, runrecord.ErrDamaged):
		return rec, err // damage, not a flag to change: exit 1
	case err != nil:
		return rec, usageError{fmt.Errorf("invalid --resume: %w", err)}
	}
	id := f.resume
	if id == resumeRecorded {
		id = rec.RunID
	}
	if id != rec.RunID {
		return rec, usagef("invalid --resume %s: output directory %s holds the output of run %s; resume that run, or give the --output that run %s wrote", id, cfg.Output, rec.RunID, id)
	}
	// Storage is not open yet: checkResumedStorage compares it.
	if d := rec.Differences(run.RecordOf(*cfg, "", "")); len(d) > 0 {
		return rec, usagef("invalid --resume %s: flags differ from the run's: %s; a resumed run must read the same input and write the same output", id, strings.Join(d, "; "))
	}
	cfg.RunID, cfg.Resumed = id, true
	return rec, nil
}

// checkResumedStorage compares the open store with the run's record,
// refuses a run that finished, and warns when storage holds nothing of the
// run: then the run starts over under
// its id, which is right after a death before its first write, but after
// storage was wiped an append sink shows every row published before as a
// duplicate.
func checkResumedStorage(ctx context.Context, exec run.Executor, env *run.Env, rec runrecord.Record, stderr io.Writer) error {
	if url := env.Store.URL(); url != rec.Storage {
		return usagef("invalid --resume %s: flags differ from the run's: --storage was %q, now %q; a resumed run must read the same input and write the same output", rec.RunID, rec.Storage, url)
	}
	if ep := s3Endpoint(env.Config); ep != rec.S3Endpoint {
		return usagef("invalid --resume %s: flags differ from the run's: --s3-endpoint (or $%s) was %q, now %q; a resumed run must use the same storage", rec.RunID, storage.EnvS3Endpoint, rec.S3Endpoint, ep)
	}
	if rec.Finished != nil {
		return usagef("invalid --resume %s: the run finished at %s, so there is nothing to resume; --overwrite starts a new run in %s", rec.RunID, rec.Finished.Format(time.RFC3339), env.Config.Output)
	}
	objs, err := env.Store.List(ctx, inspect.RunPrefix(exec.Name(), rec.Job, rec.RunID))
	if err != nil {
		return fmt.Errorf("listing run %s in %s: %w", rec.RunID, env.Store.URL(), err)
	}
	if len(objs) == 0 {
		fmt.Fprintf(stderr, "rewind: warning: %s holds nothing of run %s, so it starts again from the beginning (fine if the process died before its first write; if storage was lost since, rows already published in %s may become visible twice)\n", env.Store.URL(), rec.RunID, env.Config.Output)
	}
	return nil
}
