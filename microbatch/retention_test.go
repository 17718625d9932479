package microbatch

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/sink"
	"github.com/rewind-engine/rewind/dataflow/storage"
)

// listRun lists a run's namespace.
func listRun(t *testing.T, storageURL, jobName, runID string) Listing {
	t.Helper()
	st, err := storage.Open(context.Background(), storageURL, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	prefix := runPrefix(jobName, runID)
	objs, err := st.List(context.Background(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, len(objs))
	for i, o := range objs {
		names[i] = strings.TrimPrefix(o.Name, prefix)
	}
	return ParseListing(names)
}

// TestRetention: after many batches only the configured number of offsets
// and commit entries remain, and only the state versions they need; a
// restart in the middle (after retention has deleted older entries) still
// reaches the oracle's result.
func TestRetention(t *testing.T) {
	const keep, fullEvery = 4, 3
	for _, jobName := range []string{"keyed-count", "windowed-sum"} {
		t.Run(jobName, func(t *testing.T) {
			t.Parallel()
			storageURL := "file://" + fastDir(t)
			output := filepath.Join(fastDir(t), "out")
			inputs := defaultInputs(jobName, 16000, 9)
			opts := Options{MaxBatchRecords: 400, RetainedBatches: keep, FullSnapshotEvery: fullEvery, RunID: "retention"}
			first := &scenario{job: jobName, inputs: inputs, storage: storageURL, output: output, opts: opts,
				fails: []fault.Spec{{Worker: -1, Point: PointAfterState, Occurrence: 33}}}
			first.opts.hooks.noRestart = true
			// Retention runs in the background every keep/2 batches, and a
			// pass still running when the next is due is not doubled: how
			// far it got by the crash depends on the scheduling, so the
			// bound below follows the newest pass that completed.
			var mu sync.Mutex
			retainedTo := int64(-1)
			first.opts.hooks.onRetained = func(committed int64) {
				mu.Lock()
				defer mu.Unlock()
				retainedTo = max(retainedTo, committed)
			}
			if o := first.execute(t); o.err == nil {
				t.Fatal("first process: want a crash")
			}
			l := listRun(t, storageURL, jobName, "retention")
			if len(l.Commits) == 0 || l.Commits[len(l.Commits)-1] != 31 {
				t.Fatalf("after the crash in batch 32: commits %v, want the newest to be 31", l.Commits)
			}
			mu.Lock()
			to := retainedTo
			mu.Unlock()
			if to < 0 {
				t.Fatalf("after 32 batches no background retention pass completed")
			}
			// That pass kept batches to-keep+1..to; later ones came after.
			if l.Commits[0] < to-keep+1 || l.Offsets[0] < to-keep+1 || len(l.Commits) > int(31-to)+keep || len(l.Offsets) > int(32-to)+keep {
				t.Fatalf("after 32 batches and a retention pass up to batch %d: commits %v and offsets %v remain, want none before %d",
					to, l.Commits, l.Offsets, to-keep+1)
			}
			t.Logf("the newest background retention pass kept up to batch %d: %d commits, %d offsets entries remain", to, len(l.Commits), len(l.Offsets))
			second := &scenario{job: jobName, inputs: inputs, storage: storageURL, output: output, opts: opts}
			o := second.execute(t)
			o.check(t, "resumed after retention")
			l = listRun(t, storageURL, jobName, "retention")
			last := l.Commits[len(l.Commits)-1]
			if last < 35 {
				t.Fatalf("only %d batches; the test wants many", last+1)
			}
			if len(l.Commits) != keep || len(l.Offsets) != keep {
				t.Fatalf("at the end: commits %v, offsets %v; want the newest %d of each", l.Commits, l.Offsets, keep)
			}
			if len(l.Manifests) == 0 || len(l.Manifests) > keep {
				t.Fatalf("at the end: manifests %v; want at most %d", l.Manifests, keep)
			}
			oldest := l.Manifests[0]
			for v := range l.StateObjects {
				if v > last || v < oldest-fullEvery {
					t.Fatalf("state objects of version %d remain (manifests %v, full snapshot every %d)", v, l.Manifests, fullEvery)
				}
			}
			// The sink's destination journal shares the namespace.
			unknown := slices.DeleteFunc(l.Unknown, func(n string) bool { return strings.HasPrefix(n, sink.JournalDir) })
			if len(unknown) > 0 {
				t.Fatalf("unexpected objects %v", unknown)
			}
		})
	}
}

// TestResumeAtAnotherParallelism: state is versioned per key group, so a
// run that crashed for good at parallelism 2 resumes at 3 (and one at 3
// at 1), re-running its logged batch with the new workers.
func TestResumeAtAnotherParallelism(t *testing.T) {
	for _, c := range []struct {
		job      string
		from, to int
	}{{"keyed-count", 2, 3}, {"windowed-sum", 3, 1}, {"join", 2, 3}} {
		t.Run(fmt.Sprintf("%s/%d-to-%d", c.job, c.from, c.to), func(t *testing.T) {
			t.Parallel()
			storageURL := "file://" + fastDir(t)
			output := filepath.Join(fastDir(t), "out")
			inputs := defaultInputs(c.job, 4000, 4)
			opts := Options{MaxBatchRecords: 500, FullSnapshotEvery: 3, RunID: "rescale"}
			first := &scenario{job: c.job, inputs: inputs, storage: storageURL, output: output, opts: opts, parallelism: c.from,
				mode: sink.Transactional, fails: []fault.Spec{{Worker: -1, Point: PointAfterSink, Occurrence: 5}}}
			first.opts.hooks.noRestart = true
			if o := first.execute(t); o.err == nil {
				t.Fatal("first process: want a crash")
			}
			second := &scenario{job: c.job, inputs: inputs, storage: storageURL, output: output, opts: opts, parallelism: c.to,
				mode: sink.Transactional}
			second.execute(t).check(t, "resumed at another parallelism")
		})
	}
}
