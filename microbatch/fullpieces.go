package microbatch

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"sync"

	"github.com/rewind-engine/rewind/dataflow/keygroup"
	"github.com/rewind-engine/rewind/dataflow/operator"
	"github.com/rewind-engine/rewind/dataflow/state"
)

// Full state versions in pieces.
//
// A full version holds every key group of a stage whole. Encoded as one
// object it is as large as the state (96 MB for keyed-count at 4 M keys),
// and that object sat on Go's heap until written, which set the heap's
// peak and the collector's goal. It is written as pieces of about
// fullPieceBytes instead, each holding whole key groups, encoded and
// written one after another, so one piece is in memory at a time. The
// manifest names each key group's piece as it names any object, so a
// restore reads pieces as it reads deltas; one that needs a few key
// groups (a lost worker's) reads only their pieces.

// fullPieceBytes is about how many bytes of key-group state a piece of a
// full version holds; a key group is never split.
const fullPieceBytes = 8 << 20

// stagePieces is one stage's full version, split into pieces.
type stagePieces struct {
	stage  string
	pieces []fullPiece
	// release ends the use of the parts wrapped from the workers' bases
	// (collect); write calls it once the pieces are written.
	release func()
}

type fullPiece struct {
	name  string
	parts []operator.KeyGroupState
}

// splitFull takes every non-empty key group of stage's snapshots (one per
// subtask) for full version n and splits them, in key-group order, into
// pieces of about limit bytes. A version that fits one piece keeps the one
// object's name.
func splitFull(n int64, stage string, snaps []*stageSnap, limit int64) *stagePieces {
	parts, _, _, _, release := collectStage(snaps, true)
	sp := &stagePieces{stage: stage, release: sync.OnceFunc(release)}
	slices.SortFunc(parts, func(a, b operator.KeyGroupState) int { return cmp.Compare(a.KeyGroup, b.KeyGroup) })
	var cur []operator.KeyGroupState
	var size int64
	for _, p := range parts {
		b := batchBytes(p.Batch)
		if len(cur) > 0 && size+b > limit {
			sp.pieces = append(sp.pieces, fullPiece{parts: cur})
			cur, size = nil, 0
		}
		cur = append(cur, p)
		size += b
	}
	if len(cur) > 0 {
		sp.pieces = append(sp.pieces, fullPiece{parts: cur})
	}
	for i := range sp.pieces {
		sp.pieces[i].name = stateObjectName(n, stage)
		if len(sp.pieces) > 1 {
			sp.pieces[i].name += "-p" + strconv.Itoa(i)
		}
	}
	return sp
}

// index points every key group of the pieces at its piece in a (the
// stage's part of the version's index, cleared for a full version).
func (sp *stagePieces) index(a *[keygroup.Count][]string) {
	for _, pc := range sp.pieces {
		for _, p := range pc.parts {
			a[p.KeyGroup] = []string{pc.name}
		}
	}
}

// write encodes the pieces one at a time, handing each to put, and then
// ends the use of the parts.
func (sp *stagePieces) write(put func(name string, blob []byte) error) error {
	defer sp.release()
	for _, pc := range sp.pieces {
		var buf bytes.Buffer
		if err := state.EncodeDelta(&buf, pc.name, pc.parts, nil); err != nil {
			return fmt.Errorf("encoding state of stage %s: %w", sp.stage, err)
		}
		if err := put(pc.name, buf.Bytes()); err != nil {
			return err
		}
	}
	return nil
}
