package report

import (
	"sync"
	"time"
)

// PieceLoss is what getting lost stateless pieces back cost: the figures of
// one rebuild (lineage.Rebuild reports them), or their sum over a run. A
// piece is the output of the stateless steps for one input range, held by
// one worker (microbatch) or materialised in one file (diskphase).
type PieceLoss struct {
	// PiecesLost counts the pieces whose only copy was lost.
	PiecesLost int `json:"pieces_lost"`
	// PiecesRebuilt counts the pieces derived again: with lineage the
	// lost ones (and those on the way to them), with rerun-batch every
	// piece of the re-run batch.
	PiecesRebuilt int `json:"pieces_rebuilt"`
	// RecordsReread counts the input records fed through the stateless
	// steps again to get the pieces back.
	RecordsReread int64 `json:"records_reread"`
	// Wall is the time spent deriving them again.
	Wall time.Duration `json:"wall_ns"`
}

// Add adds q's figures to p.
func (p *PieceLoss) Add(q PieceLoss) {
	p.PiecesLost += q.PiecesLost
	p.PiecesRebuilt += q.PiecesRebuilt
	p.RecordsReread += q.RecordsReread
	p.Wall += q.Wall
}

// PieceTally sums a run's lost-piece recoveries for the summary. The zero
// value is an empty tally. Safe for concurrent use.
type PieceTally struct {
	mu         sync.Mutex
	recoveries int
	sum        PieceLoss
}

// Loss counts one loss that destroyed pieces, with what is known of its
// cost so far.
func (t *PieceTally) Loss(p PieceLoss) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.recoveries++
	t.sum.Add(p)
}

// More adds figures of a loss already counted (a rebuild that ended later
// than its loss was noticed).
func (t *PieceTally) More(p PieceLoss) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.sum.Add(p)
}

// Summary is the tally as the summary reports it, of recoveries done by
// recovery (lineage or rerun-batch).
func (t *PieceTally) Summary(recovery string) *LostPieces {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := &LostPieces{Recovery: recovery, Recoveries: t.recoveries, PiecesLost: t.sum.PiecesLost,
		PiecesRebuilt: t.sum.PiecesRebuilt, RecordsReread: t.sum.RecordsReread}
	if t.sum.PiecesRebuilt > 0 {
		s.RebuildMs = MillisPtr(&t.sum.Wall)
	}
	return s
}
