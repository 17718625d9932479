package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"image/png"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/report"
	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/sink"
	"github.com/rewind-engine/rewind/diskphase"
	"github.com/rewind-engine/rewind/microbatch"
	"github.com/rewind-engine/rewind/recordwise"
	"github.com/rewind-engine/rewind/reference"
)

var known = []run.Executor{reference.Executor{}, microbatch.Executor{}, diskphase.Executor{}, recordwise.Executor{}}

// defaults are the default contestants of known.
var defaults = DefaultContestants(known)

func TestParseContestants(t *testing.T) {
	if defaults != "microbatch,diskphase,recordwise/aligned,recordwise/unaligned" {
		t.Fatalf("default contestants %q", defaults)
	}
	got, err := ParseContestants(defaults, known)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range got {
		names = append(names, c.Name())
	}
	if strings.Join(names, ",") != defaults {
		t.Fatalf("default contestants parsed as %v", names)
	}
	if c, err := ParseContestants("recordwise", known); err != nil || c[0].Variant != "aligned" {
		t.Fatalf("bare recordwise: %v, %v; want aligned barriers", c, err)
	}
	for list, want := range map[string]string{
		"spark":                         "unknown executor",
		"reference":                     "not a contestant",
		"microbatch/aligned":            "only recordwise takes a barrier mode",
		"recordwise/sideways":           "aligned or unaligned",
		"microbatch,microbatch":         "listed twice",
		"recordwise,recordwise/aligned": "listed twice",
	} {
		if _, err := ParseContestants(list, known); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseContestants(%q) = %v, want an error mentioning %q", list, err, want)
		}
	}
}

func TestBillSumsRecoveriesAndKeepsNulls(t *testing.T) {
	f := func(v float64) *float64 { return &v }
	n := func(v int64) *int64 { return &v }
	clean := &report.Summary{WallMs: 1000}
	crash := &report.Summary{WallMs: 1300, Recoveries: []report.Recovery{
		{DetectMs: f(1), RestoreMs: f(10), ReprocessedRecords: n(100), CatchUpMs: f(5)},
		{DetectMs: f(2), RestoreMs: f(20), ReprocessedRecords: n(50), CatchUpMs: f(7)},
	}}
	b := BillOf(clean, crash)
	if b.Recoveries != 2 || *b.DetectMs != 3 || *b.RestoreMs != 30 || *b.Reprocessed != 150 || *b.CatchUpMs != 12 || b.ExtraWallMs != 300 {
		t.Fatalf("bill %+v", b)
	}
	if r := b.RecoveryMs(); r == nil || *r != 45 {
		t.Fatalf("recovery ms = %v, want 45", r)
	}
	// One recovery without a catch-up figure: a partial sum would flatter
	// the contestant, so the field and the recovery time stay unknown.
	crash.Recoveries[1].CatchUpMs = nil
	b = BillOf(clean, crash)
	if b.CatchUpMs != nil || b.RecoveryMs() != nil || *b.RestoreMs != 30 {
		t.Fatalf("partial catch-up must stay null: %+v", b)
	}
	if BillOf(clean, &report.Summary{}).RecoveryMs() != nil {
		t.Fatal("a run without recoveries has no recovery time")
	}
}

func executors() map[string]run.Executor {
	m := map[string]run.Executor{}
	for _, e := range known {
		m[e.Name()] = e
	}
	return m
}

func plan(t *testing.T, alloc memory.Allocator, contestants string) Plan {
	t.Helper()
	cs, err := ParseContestants(contestants, known)
	if err != nil {
		t.Fatal(err)
	}
	return Plan{
		Config: run.Config{Job: "keyed-count", Params: job.DefaultParams,
			Inputs:       map[string]string{job.DefaultInput: "gen:records=20000,keys=100,seed=7"},
			OutputFormat: sink.Parquet, SinkMode: sink.Idempotent, Parallelism: 2, Seed: 1},
		Options: map[string]run.Options{
			"microbatch": microbatch.Options{Trigger: 5 * time.Millisecond, RetainedBatches: 3, LostPieceRecovery: "lineage"},
			"diskphase":  diskphase.Options{JobRecords: 5000, LostPieceRecovery: "lineage"},
			"recordwise": recordwise.Options{CheckpointInterval: 5 * time.Millisecond, BufferTimeout: time.Millisecond,
				CheckpointTimeout: time.Minute, RetainedCheckpoints: 2},
		},
		Contestants: cs, Scratch: t.TempDir(), Executors: executors(), Alloc: alloc,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
}

// TestRunComparesEveryContestantWithTheReference runs every executor
// crash-free and with the default crash, and checks the report: every
// output correct, every crash run with a recovery, nothing leaked.
func TestRunComparesEveryContestantWithTheReference(t *testing.T) {
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	p := plan(t, alloc, defaults)
	var progress bytes.Buffer
	p.Progress = &progress
	rep, err := Run(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Failed() {
		var b bytes.Buffer
		_ = rep.WriteText(&b)
		t.Fatalf("a contestant failed:\n%s", b.String())
	}
	if len(rep.Results) != 4 || rep.Reference == nil || rep.Reference.RecordsIn != 20000 {
		t.Fatalf("report has %d results, reference %+v", len(rep.Results), rep.Reference)
	}
	for _, res := range rep.Results {
		if res.Crash == nil || res.Crash.Summary.Crashes != 1 || len(res.Crash.Summary.Recoveries) != 1 {
			t.Errorf("%s: crash run %+v, want exactly one crash and one recovery", res.Contestant, res.Crash)
		}
		if want := []string{(fault.Spec{Worker: 0, AfterRecords: 10000}).String()}; strings.Join(res.Crash.Fails, " ") != want[0] {
			t.Errorf("%s: crash run had %v, want the default %v", res.Contestant, res.Crash.Fails, want)
		}
	}
	if !strings.Contains(progress.String(), "[8/8] recordwise/unaligned with crash") {
		t.Errorf("progress does not count the runs:\n%s", progress.String())
	}
	if n := alloc.CurrentAlloc(); n != 0 {
		t.Fatalf("%d bytes of Arrow memory still allocated", n)
	}

	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"While running", "After a crash (--fail worker=0,after-records=10000)", "recordwise/unaligned", "restore ms"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, text.String())
		}
	}
	dir := t.TempDir()
	if err := rep.WriteReport(dir); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| microbatch | ok |", "![latency](latency.png)", "![latency vs. recovery cost](tradeoff.png)"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q:\n%s", want, md)
		}
	}
	for _, img := range []string{"latency.png", "tradeoff.png"} {
		f, err := os.Open(filepath.Join(dir, img))
		if err != nil {
			t.Fatal(err)
		}
		_, err = png.Decode(f)
		f.Close()
		if err != nil {
			t.Errorf("%s is not a PNG: %v", img, err)
		}
	}
	var back Report
	js, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(js, &back); err != nil || len(back.Results) != 4 {
		t.Fatalf("report.json does not read back: %v (%d results)", err, len(back.Results))
	}
}

// losingExecutor wraps a correct executor and then deletes the visible
// output: the benchmark must call that wrong, however fast it was.
type losingExecutor struct{ run.Executor }

func (l losingExecutor) Run(ctx context.Context, env *run.Env) (*report.Summary, error) {
	s, err := l.Executor.Run(ctx, env)
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(env.Config.Output)
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), "_") && !strings.HasPrefix(e.Name(), ".") {
			if err := os.RemoveAll(filepath.Join(env.Config.Output, e.Name())); err != nil {
				return nil, err
			}
		}
	}
	return s, nil
}

func TestWrongContestantIsReportedWrong(t *testing.T) {
	p := plan(t, memory.NewGoAllocator(), "microbatch")
	p.Executors["microbatch"] = losingExecutor{microbatch.Executor{}}
	p.Faults.None = true
	p.Config.SinkMode = sink.Append // an idempotent sink would export its rows again on Finish
	rep, err := Run(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Failed() || rep.Results[0].Clean.Correct || rep.Results[0].Crash != nil {
		t.Fatalf("a contestant that lost its output was not reported wrong: %+v", rep.Results[0].Clean)
	}
	var text bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "WRONG") || !strings.Contains(text.String(), "differs from the reference") {
		t.Fatalf("text report does not say the result was wrong:\n%s", text.String())
	}
}

func TestUnknownWorkerIsRefusedBeforeAnyRun(t *testing.T) {
	p := plan(t, memory.NewGoAllocator(), "microbatch")
	p.Faults.Specs = []fault.Spec{{Worker: 9, AfterRecords: 10}}
	if _, err := Run(context.Background(), p); err == nil || !strings.Contains(err.Error(), "worker 9 does not exist") {
		t.Fatalf("got %v, want an error naming the missing worker", err)
	}
}
