package report

import "time"

// SeriesInput is one input, as the recorder sees it, of an executor that
// reads ahead of what it processes (microbatch's prefetch) and so reports
// its own positions: what its batches take (processed, re-read) and where
// a finished batch leaves each partition (the position the lag counts
// from). A reader's position would drain the lag as soon as the prefetch
// refills, long before the batches have processed those records. The zero
// SeriesInput, and one of a nil recorder, records nothing.
type SeriesInput struct {
	r     *SeriesRecorder
	first int
}

// InputOwn is Input for a source whose executor reports its positions
// through the returned SeriesInput; its readers' reads are not counted.
// Open still marks where a partition starts.
func (r *SeriesRecorder) InputOwn(partitions int, due func(time.Time) int64) SeriesInput {
	if r == nil {
		return SeriesInput{}
	}
	return SeriesInput{r: r, first: r.input(partitions, due, true)}
}

// First is the recorder's index of the input's partition 0 (Open's part).
func (in SeriesInput) First() int { return in.first }

// openOwn makes offset the start of own partition p if nothing was
// recorded of it yet. r.mu is held.
func (r *SeriesRecorder) openOwn(p *seriesPart, offset int64) {
	if p.opened {
		return
	}
	// What came before was an earlier process's (--resume).
	p.opened, p.hw, p.pos = true, offset, offset
	r.sumPosOwn += offset
	if p.unpaced {
		r.sumHWUnpaced += offset
		r.sumBaseUnpaced += offset
	}
}

// Took records that a batch took records [start, end) of partition i to
// process: all of them processed, those below the partition's high-water
// mark re-read. Taking below it starts a replay, which lasts until Done
// reaches the high-water mark again.
func (in SeriesInput) Took(i int, start, end int64) {
	r := in.r
	if r == nil || end <= start {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	b := &r.acc[r.roll(now)]
	p := r.parts[in.first+i]
	r.openOwn(p, start)
	b.processed += end - start
	b.reread += max(0, min(end, p.hw)-start)
	before := r.behind()
	if start < p.hw && !p.replay {
		p.replay = true
		r.replaying++
	}
	if end > p.hw {
		if p.unpaced {
			r.sumHWUnpaced += end - p.hw
		}
		p.hw = end
	}
	r.gapChanged(before, now)
}

// Done records that the batch that took partition i up to end finished
// (committed): the partition's position is end.
func (in SeriesInput) Done(i int, end int64) {
	r := in.r
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	r.roll(now)
	p := r.parts[in.first+i]
	r.openOwn(p, end)
	before := r.behind()
	r.sumPosOwn += end - p.pos
	p.pos = end
	if p.replay && end >= p.hw {
		p.replay = false
		r.replaying--
	}
	r.gapChanged(before, now)
}
