package source

import "time"

// Schedule is one paced partition's feed as its readers follow it: the
// time its source's schedule is anchored at and the position the
// partition counts from (see pacer). A coordinator whose readers run in
// other processes fixes it where its own reader would open, and sends it
// with the read, so every worker process reads on one schedule: a
// replacement finds the backlog due, and a split read by another process
// than the one before it is due when it would be in one process.
type Schedule struct {
	Start time.Time `json:"start"`
	Base  int64     `json:"base"`
}

// Scheduled is a paced source whose schedule can be fixed in one process
// and followed in another; FixSchedule and FollowSchedule reach it through
// wrappers that forward them.
type Scheduled interface {
	// FixSchedule fixes partition i's schedule as a reader opened at pos
	// would (the anchor on the source's first use, the base on the
	// partition's) and returns it; false if the source is not paced.
	FixSchedule(i int, pos Position) (Schedule, bool)
	// FollowSchedule makes the source's readers of partition i keep s,
	// instead of the anchor and base their own first open would fix.
	FollowSchedule(i int, s Schedule)
}

// FixSchedule is src's Scheduled.FixSchedule; false for a source without
// a schedule (unpaced, or not Scheduled).
func FixSchedule(src Source, i int, pos Position) (Schedule, bool) {
	if s, ok := src.(Scheduled); ok {
		return s.FixSchedule(i, pos)
	}
	return Schedule{}, false
}

// FollowSchedule is src's Scheduled.FollowSchedule; nothing for a source
// without one.
func FollowSchedule(src Source, i int, s Schedule) {
	if sc, ok := src.(Scheduled); ok {
		sc.FollowSchedule(i, s)
	}
}

// FixSchedule implements Scheduled for gen:.
func (g *genSource) FixSchedule(i int, pos Position) (Schedule, bool) {
	if g.cfg.rate <= 0 || i < 0 || i >= len(g.names) {
		return Schedule{}, false
	}
	return Schedule{Start: g.start.at(), Base: g.base(i, pos.Offset)}, true
}

// FollowSchedule implements Scheduled for gen:. The anchor is the
// source's, shared by its partitions: the coordinator's is one time, so
// every partition's schedule carries the same Start.
func (g *genSource) FollowSchedule(i int, s Schedule) {
	if g.cfg.rate <= 0 || i < 0 || i >= len(g.names) {
		return
	}
	g.start.follow(s.Start)
	g.mu.Lock()
	g.bases[i] = s.Base
	g.mu.Unlock()
}

// base is partition i's base: pos on its first use, as Open fixes it.
func (g *genSource) base(i int, pos int64) int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	b, ok := g.bases[i]
	if !ok {
		b = pos
		g.bases[i] = b
	}
	return b
}
