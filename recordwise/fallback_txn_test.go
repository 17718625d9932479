package recordwise

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/sink"
)

// TestFallbackReplaySurvivesLaterRestore builds, across three processes of
// one run with a transactional sink, the storage state the reliability
// campaign found republishing committed epochs:
//
//  1. the first process is stopped once its sixth checkpoint is complete,
//     so epochs up to at least 5 are published;
//  2. every recovery point but the oldest is damaged in durable storage
//     (its _metadata deleted, or a byte flipped in a part object), so the
//     second process falls back to point 1 and replays input whose rows are
//     already visible; it is stopped once its first checkpoint is
//     complete, long before the replay (paced, as the input is) has caught
//     up with what the first process published;
//  3. the third process restores that checkpoint and finishes the run.
//
// The third one's replay still re-reads input whose rows the first process
// published: it must drop them like the second did. The resolved output
// equals the oracle's with no duplicate and no conflicting row, and the
// third process says it dropped replayed rows (the condition happened).
func TestFallbackReplaySurvivesLaterRestore(t *testing.T) {
	for _, j := range jobs {
		for _, c := range []struct {
			barriers barrierSetting
			damage   string
		}{{barrierSetting{"aligned", 0}, "delete-metadata"}, {barrierSetting{"unaligned", 0}, "flip-part"}} {
			t.Run(j+"/"+c.barriers.String()+"/"+c.damage, func(t *testing.T) {
				fallbackAcrossProcesses(t, j, c.barriers, c.damage)
			})
		}
	}
}

func fallbackAcrossProcesses(t *testing.T, jobName string, b barrierSetting, damage string) {
	storeDir, out := fastDir(t), filepath.Join(fastDir(t), "out")
	runID := "fallback-" + jobName + "-" + b.String()
	// Paced, so a process restoring an old point replays at the input's
	// rate, and its first checkpoint covers a fraction of the replay.
	records := 18000 // 1.8 s at the paced rate: room for six slow checkpoints on a loaded machine
	if jobName == "join" {
		records *= 2 // half of them in each input
	}
	in := inputs(jobName, records, 10000, 21)
	proc := func(resumed bool, stopWhen func(CheckpointStats) bool) *scenario {
		sc := &scenario{job: jobName, mode: sink.Transactional, barriers: b, inputs: in, retained: 1000,
			storage: "file://" + storeDir, output: out, resumed: resumed, stopWhen: stopWhen}
		if jobName == "windowed-sum" {
			// Windows of 50 ms of event time close every few checkpoints.
			sc.params = &job.Params{Window: 50, JoinWindow: job.DefaultParams.JoinWindow}
		}
		sc.opts.RunID = runID
		return sc
	}
	what := fmt.Sprintf("%s/%s, %s (replay: go test -race -count=1 -run 'TestFallbackReplaySurvivesLaterRestore/%s/%s/%s' ./recordwise/)",
		jobName, b, damage, jobName, b, damage)

	stopped := false
	first := proc(false, func(cs CheckpointStats) bool {
		// Stop once rows of an epoch after the oldest point are visible:
		// windowed-sum publishes nothing until a window closes, which an
		// uninstrumented build reaches many checkpoints later than -race.
		stopped = stopped || cs.Status == "completed" && !cs.Final && cs.ID >= 6 && publishedFilesAfter(t, out, 1) > 0
		return stopped
	})
	first.measureOnly = true
	if o := first.executeRaw(t); o.err != nil {
		t.Fatalf("%s: first process: %v", what, o.err)
	} else if !stopped {
		t.Fatalf("%s: the first process ended before its sixth checkpoint with rows visible after the first: %d completed", what, o.summary.Checkpoints.Completed)
	}
	// Every complete point but the oldest (point 1: every point is
	// retained) is damaged; epochs after it are visible.
	runDir := filepath.Join(storeDir, runPrefix(jobName, runID))
	oldest := damageAllButOldest(t, runDir, damage)
	if n := publishedFilesAfter(t, out, int64(oldest)); n == 0 {
		t.Fatalf("%s: nothing visible after recovery point %d: the fallback would replay nothing already published", what, oldest)
	}

	second := proc(true, func(cs CheckpointStats) bool { return cs.Status == "completed" && !cs.Final })
	second.measureOnly = true
	o := second.executeRaw(t)
	if o.err != nil {
		t.Fatalf("%s: second process: %v", what, o.err)
	}
	if from := o.report.Restores[0].From; uint64(from) != oldest {
		t.Fatalf("%s: second process restored point %d, want the undamaged %d", what, from, oldest)
	}
	if o.summary.Checkpoints.Completed == 0 {
		t.Fatalf("%s: second process completed no checkpoint before it was stopped", what)
	}

	third := proc(true, nil)
	o = third.execute(t)
	o.check(t, what+", third process")
	if from := o.report.Restores[0].From; uint64(from) <= oldest {
		t.Fatalf("%s: third process restored point %d, want one the second process took (after %d)", what, from, oldest)
	}
	if !slices.ContainsFunc(o.summary.Notes, func(n string) bool { return strings.Contains(n, "replayed rows already visible") }) {
		t.Fatalf("%s: the third process dropped no replayed row (its restored point %d was past the replay?): %v",
			what, o.report.Restores[0].From, o.summary.Notes)
	}
}

// damageAllButOldest damages every complete checkpoint in runDir (local
// storage) but the oldest, whose id it returns: damage "delete-metadata"
// deletes the _metadata object, "flip-part" flips a byte in the middle of
// each part descriptor (the storage checksum rejects it).
func damageAllButOldest(t *testing.T, runDir, damage string) uint64 {
	t.Helper()
	entries, err := os.ReadDir(runDir)
	if err != nil {
		t.Fatal(err)
	}
	var complete []string
	for _, e := range entries {
		if _, err := os.Stat(filepath.Join(runDir, e.Name(), metadataName)); err == nil && strings.HasPrefix(e.Name(), chkDirPrefix) {
			complete = append(complete, e.Name())
		}
	}
	slices.Sort(complete)
	if len(complete) < 2 {
		t.Fatalf("%d complete checkpoints in %s, want 2 or more", len(complete), runDir)
	}
	for _, dir := range complete[1:] {
		switch damage {
		case "delete-metadata":
			if err := os.Remove(filepath.Join(runDir, dir, metadataName)); err != nil {
				t.Fatal(err)
			}
		case "flip-part":
			parts, err := filepath.Glob(filepath.Join(runDir, dir, "*", partName))
			if err != nil || len(parts) == 0 {
				t.Fatalf("no part descriptor in %s: %v", dir, err)
			}
			for _, p := range parts {
				data, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				data[len(data)/2] ^= 0xff
				if err := os.WriteFile(p, data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		default:
			t.Fatalf("unknown damage %q", damage)
		}
	}
	id, _, ok := parseChkName(complete[0] + "/" + metadataName)
	if !ok {
		t.Fatalf("cannot parse checkpoint directory %s", complete[0])
	}
	return uint64(id)
}

// epochRows is an EpochPublisher over rows by epoch, for publishedIn.
type epochRows map[int64][][]int64

func (e epochRows) PublishedAfter(after int64) (int64, [][]int64, error) {
	last := int64(-1)
	var rows [][]int64
	for ep, r := range e {
		last = max(last, ep)
		if ep > after {
			rows = append(rows, r...)
		}
	}
	return last, rows, nil
}

// TestReplayedSpans: publishedIn returns exactly the rows of the span's
// epochs, equal rows in other epochs included as often as they occur
// inside; spans touching are joined; metadata naming a span a point cannot
// carry is refused.
func TestReplayedSpans(t *testing.T) {
	pub := epochRows{1: {{1, 1}}, 2: {{2, 1}, {7, 7}}, 3: {{7, 7}, {3, 1}}, 4: {{7, 7}, {4, 1}}}
	got, err := publishedIn(pub, epochSpan{After: 1, Through: 3})
	if err != nil {
		t.Fatal(err)
	}
	slices.SortFunc(got, slices.Compare)
	if want := [][]int64{{2, 1}, {3, 1}, {7, 7}, {7, 7}}; !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("rows of epochs 2..3: got %v, want %v", got, want)
	}
	spans := addSpan(addSpan(nil, epochSpan{-1, 2}), epochSpan{2, 5})
	if want := []epochSpan{{-1, 5}}; !slices.Equal(spans, want) {
		t.Fatalf("joined spans: got %v, want %v", spans, want)
	}
	if spans = addSpan(spans, epochSpan{7, 9}); len(spans) != 2 {
		t.Fatalf("disjoint spans joined: %v", spans)
	}
	if err := checkReplayed(spans, 10); err != nil {
		t.Fatalf("valid spans refused: %v", err)
	}
	for _, bad := range [][]epochSpan{{{-2, 3}}, {{3, 3}}, {{1, 10}}, {{4, 6}, {5, 8}}} {
		if err := checkReplayed(bad, 10); err == nil {
			t.Fatalf("spans %v accepted for recovery point 10", bad)
		}
	}
}
