package microbatch

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/keygroup"
	"github.com/rewind-engine/rewind/dataflow/operator"
	"github.com/rewind-engine/rewind/dataflow/operator/optest"
	"github.com/rewind-engine/rewind/dataflow/runtest"
	"github.com/rewind-engine/rewind/dataflow/sink"
	"github.com/rewind-engine/rewind/dataflow/state"
	"github.com/rewind-engine/rewind/dataflow/storage"
)

// The delta tests run keyed-count over many keys in small batches, so
// that every batch changes a few entries of most key groups: each version
// after the first stores edits, and the chains grow long (full snapshots
// are pushed far away). The first process dies for good at a crash point;
// the second resumes.
const (
	dtRecords = 6000
	dtKeys    = 2000
	dtBatch   = 200
	dtRunID   = "deltas"
)

func dtOpts() Options {
	o := Options{MaxBatchRecords: dtBatch, RunID: dtRunID, RetainedBatches: 40, FullSnapshotEvery: 100}
	o.hooks.fullAfterDeltas = 1000
	return o
}

func dtInputs() map[string]string {
	return runtest.Gen{Records: dtRecords, Keys: dtKeys, Seed: 41}.Inputs("keyed-count")
}

// dtFirst runs the first process until the crash fail, and returns the
// storage URL, the output and the inputs.
func dtFirst(t *testing.T, mode sink.Mode, fail fault.Spec) (string, string, map[string]string) {
	t.Helper()
	return dtFirstWith(t, mode, dtOpts(), fail)
}

// dtFirstWith is dtFirst with options opts.
func dtFirstWith(t *testing.T, mode sink.Mode, opts Options, fail fault.Spec) (string, string, map[string]string) {
	t.Helper()
	storageURL := "file://" + fastDir(t)
	output := filepath.Join(fastDir(t), "out")
	inputs := dtInputs()
	first := &scenario{job: "keyed-count", inputs: inputs, storage: storageURL, output: output, mode: mode,
		parallelism: 2, opts: opts, fails: []fault.Spec{fail}}
	first.opts.hooks.noRestart = true
	if o := first.execute(t); o.err == nil {
		t.Fatal("first process: want the injected crash to end it")
	}
	return storageURL, output, inputs
}

// dtCrashedInState opens the storage of a first process that crashed
// writing batch crashAt's state and lists its run, which must have
// committed up to the batch before.
func dtCrashedInState(t *testing.T, storageURL string, crashAt int64) (storage.Store, string, Listing) {
	t.Helper()
	st, err := storage.Open(context.Background(), storageURL, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	l := listRun(t, storageURL, "keyed-count", dtRunID)
	if newest(l) != crashAt-1 {
		t.Fatalf("after the crash writing batch %d's state: commits %v", crashAt, l.Commits)
	}
	return st, runPrefix("keyed-count", dtRunID), l
}

// checkChains fails unless the newest committed version is rebuilt from a
// full snapshot and at least minEdits later edits of one key group, and
// its newest object really holds edits: the restore under test goes
// through deltas.
func checkChains(t *testing.T, st storage.Store, prefix string, l Listing, minEdits int) {
	t.Helper()
	ce := readCommitFile(t, st, prefix, newest(l))
	m := readManifestFile(t, st, prefix, ce.StateVersion)
	idx, err := m.index(checkStateObjectName)
	if err != nil {
		t.Fatal(err)
	}
	longest := 0
	for _, a := range idx {
		for _, chain := range a {
			longest = max(longest, len(chain)-1)
		}
	}
	if longest < minEdits {
		t.Fatalf("version %d: longest chain has %d edits, want at least %d: the test does not restore through deltas", ce.StateVersion, longest, minEdits)
	}
	objs := l.StateObjects[ce.StateVersion]
	if len(objs) == 0 {
		t.Fatalf("no state objects of version %d", ce.StateVersion)
	}
	data, err := st.Get(context.Background(), prefix+objs[0])
	if err != nil {
		t.Fatal(err)
	}
	_, parts, edits, err := state.DecodeDelta(data, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range parts {
		p.Batch.Release()
	}
	if len(edits) == 0 {
		t.Fatalf("%s holds no edit: every changed key group was stored whole", objs[0])
	}
}

// TestRestoreFromFullAndDeltas: a process killed while the state objects
// of a delta version are being written (some may have landed, the commit
// entry has not), resumed, restores the newest committed version from its
// full snapshot and the chain of edits after it, and ends equal to the
// oracle; so does one killed in the middle of a later delta, when a
// restore has already happened once.
func TestRestoreFromFullAndDeltas(t *testing.T) {
	for _, mode := range []sink.Mode{sink.Idempotent, sink.Transactional} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			const crashAt = 14 // batch
			storageURL, output, inputs := dtFirst(t, mode, fault.Spec{Worker: -1, Point: PointStateMidWrite, Occurrence: crashAt + 1})
			st, prefix, l := dtCrashedInState(t, storageURL, crashAt)
			checkChains(t, st, prefix, l, 5)
			// The second process dies in the middle of a delta too, after
			// its restore; the in-process restart restores again.
			second := &scenario{job: "keyed-count", inputs: inputs, storage: storageURL, output: output, mode: mode,
				parallelism: 2, opts: dtOpts(), resumed: true,
				fails: []fault.Spec{{Worker: -1, Point: PointStateMidWrite, Occurrence: 4}}}
			o := second.execute(t)
			o.check(t, "resumed after a crash mid-delta")
			if from := o.summary.ResumedFrom; from == nil || from.ID == nil || *from.ID != crashAt-1 {
				t.Fatalf("resumed from %+v, want batch %d", o.summary.ResumedFrom, crashAt-1)
			}
			if p := o.faults.Pending(); len(p) > 0 {
				t.Fatalf("second crash never fired: %v", p)
			}
		})
	}
}

// TestDeltaDamageFallsBack: the newest delta damaged (a flipped byte,
// which storage detects), or replaced whole by the intact delta of the
// version before (which storage cannot detect: the object's name inside it
// and its edits' checks can), is never loaded: the restart falls back to
// the batch before it and ends equal to the oracle.
func TestDeltaDamageFallsBack(t *testing.T) {
	for _, kind := range []string{"flipped", "swapped"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			const crashAt = 12
			storageURL, output, inputs := dtFirst(t, sink.Transactional, fault.Spec{Worker: -1, Point: PointAfterSink, Occurrence: crashAt + 1})
			st, err := storage.Open(context.Background(), storageURL, storage.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			prefix := runPrefix("keyed-count", dtRunID)
			l := listRun(t, storageURL, "keyed-count", dtRunID)
			checkChains(t, st, prefix, l, 5)
			v := readCommitFile(t, st, prefix, newest(l)).StateVersion
			victim := l.StateObjects[v][0]
			switch kind {
			case "flipped":
				corruptFile(t, storageURL, prefix+victim)
				if _, err := st.Get(context.Background(), prefix+victim); !errors.Is(err, storage.ErrCorrupt) {
					t.Fatalf("reading %s after damaging it: %v, want %v", victim, err, storage.ErrCorrupt)
				}
			case "swapped":
				older := strings.Replace(victim, batchName(v), batchName(v-1), 1)
				data, err := st.Get(context.Background(), prefix+older)
				if err != nil {
					t.Fatalf("the test swaps in %s: %v", older, err)
				}
				if err := st.Put(context.Background(), prefix+victim, data); err != nil {
					t.Fatal(err)
				}
			}
			second := &scenario{job: "keyed-count", inputs: inputs, storage: storageURL, output: output, mode: sink.Transactional,
				parallelism: 2, opts: dtOpts(), resumed: true}
			o := second.execute(t)
			o.check(t, "resumed past a "+kind+" delta")
			if from := o.summary.ResumedFrom; from == nil || from.ID == nil || *from.ID >= v {
				t.Fatalf("resumed from %+v, want a batch before version %d, whose delta %s is %s", o.summary.ResumedFrom, v, victim, kind)
			}
			if note := fallbackNote(o.summary); !strings.Contains(note, victim) {
				t.Fatalf("summary notes %q: want one naming %s", o.summary.Notes, victim)
			}
		})
	}
}

// TestFingerprintsIgnoreTheWatermark: two snapshots of one subtask
// fingerprint equal when only the watermark differs, and differ when a
// value does (what the marker lesson compares).
func TestFingerprintsIgnoreTheWatermark(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "key", Type: arrow.PrimitiveTypes.Int64}, {Name: "count", Type: arrow.PrimitiveTypes.Int64},
		{Name: watermarkColumn, Type: arrow.PrimitiveTypes.Int64}}, nil)
	snap := func(rows [][]int64) [keygroup.Count]uint64 {
		s := &stageSnap{parts: []operator.KeyGroupState{{KeyGroup: 5, Batch: optest.Batch(mem, schema, rows)}}}
		defer s.release()
		return s.fingerprints()
	}
	a := snap([][]int64{{1, 2, 10}, {3, 4, 10}})
	b := snap([][]int64{{1, 2, 11}, {3, 4, 11}})
	c := snap([][]int64{{1, 2, 10}, {3, 5, 10}})
	if a[5] == 0 || a[5] != b[5] || a[5] == c[5] || a[4] != 0 {
		t.Fatalf("fingerprints %x %x %x: want equal but for the watermark, different for a value, 0 for an empty group", a[5], b[5], c[5])
	}
}

// TestChainAcrossARestore: edits written after a restore apply to the
// state as storage rebuilds it, so a chain that spans a restore rebuilds
// whole: a run resumed twice resumes the second time from its newest
// committed batch, with no fallback, and ends equal to the oracle.
func TestChainAcrossARestore(t *testing.T) {
	const crashAt = 8
	storageURL, output, inputs := dtFirst(t, sink.Idempotent, fault.Spec{Worker: -1, Point: PointAfterSink, Occurrence: crashAt + 1})
	second := &scenario{job: "keyed-count", inputs: inputs, storage: storageURL, output: output, mode: sink.Idempotent,
		parallelism: 2, opts: dtOpts(), resumed: true, fails: []fault.Spec{{Worker: -1, Point: PointAfterSink, Occurrence: crashAt + 1}}}
	second.opts.hooks.noRestart = true
	if o := second.execute(t); o.err == nil {
		t.Fatal("second process: want the injected crash to end it")
	}
	st, err := storage.Open(context.Background(), storageURL, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	l := listRun(t, storageURL, "keyed-count", dtRunID)
	last := newest(l)
	if last < 2*crashAt-2 {
		t.Fatalf("after two crashes: newest commit %d, want at least %d", last, 2*crashAt-2)
	}
	checkChains(t, st, runPrefix("keyed-count", dtRunID), l, crashAt+2) // spans the first restore
	third := &scenario{job: "keyed-count", inputs: inputs, storage: storageURL, output: output, mode: sink.Idempotent,
		parallelism: 2, opts: dtOpts(), resumed: true}
	o := third.execute(t)
	o.check(t, "resumed twice")
	if note := fallbackNote(o.summary); note != "" {
		t.Fatalf("the second resume fell back: %s", note)
	}
	if from := o.summary.ResumedFrom; from == nil || from.ID == nil || *from.ID != last {
		t.Fatalf("resumed from %+v, want the newest committed batch %d", o.summary.ResumedFrom, last)
	}
}
