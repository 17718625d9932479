package microbatch

import (
	"strings"
	"testing"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/sink"
)

// TestFullVersionInPieces: with pieces of 2 KiB, the full versions of a
// 2,000-key state are written as several objects, each holding whole key
// groups. A process killed while writing a full version resumes from the
// version before, rebuilt from a full version in pieces and the deltas
// after it, and ends equal to the oracle.
func TestFullVersionInPieces(t *testing.T) {
	const crashAt = 8 // a full version: FullSnapshotEvery 4
	opts := func() Options {
		o := dtOpts()
		o.FullSnapshotEvery = 4
		o.hooks.fullPieceBytes = 2 << 10
		return o
	}
	storageURL, output, inputs := dtFirstWith(t, sink.Idempotent, opts(), fault.Spec{Worker: -1, Point: PointStateMidWrite, Occurrence: crashAt + 1})
	st, prefix, l := dtCrashedInState(t, storageURL, crashAt)
	ce := readCommitFile(t, st, prefix, newest(l))
	m := readManifestFile(t, st, prefix, ce.StateVersion)
	idx, err := m.index(checkStateObjectName)
	if err != nil {
		t.Fatal(err)
	}
	pieces := map[string]bool{}
	for _, a := range idx {
		for _, chain := range a {
			if len(chain) > 0 && strings.Contains(chain[0], "-p") {
				pieces[chain[0]] = true
			}
		}
	}
	if len(pieces) < 2 {
		t.Fatalf("version %d is rebuilt from %d pieces of a full version (%v), want several", ce.StateVersion, len(pieces), pieces)
	}
	second := &scenario{job: "keyed-count", inputs: inputs, storage: storageURL, output: output, mode: sink.Idempotent,
		parallelism: 2, opts: opts(), resumed: true}
	o := second.execute(t)
	o.check(t, "resumed from a full version in pieces")
	if from := o.summary.ResumedFrom; from == nil || from.ID == nil || *from.ID != crashAt-1 {
		t.Fatalf("resumed from %+v, want batch %d", o.summary.ResumedFrom, crashAt-1)
	}
}
