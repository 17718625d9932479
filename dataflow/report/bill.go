package report

import "time"

// CauseProcessDied is the cause of the recovery a resumed process bills
// for the death of the process before it, the same in every executor.
const CauseProcessDied = "earlier process died (--resume)"

// Crash is the bill of one crash (or of one lost file) while recovery fills
// it in. A nil figure is not measured (yet); it stays null in the summary.
type Crash struct {
	Cause string
	// At is when the crash happened; a resumed process's start stands for
	// the earlier process's death.
	At     time.Time
	Detect *time.Duration
	// Acquire is the time from declared dead to a replacement ready;
	// Modelled names the parts that are modelled delays ("detect",
	// "acquire"). Restore is measured from the replacement being ready to
	// the recovery point loaded, so At+Detect+Acquire+Restore is when
	// processing restarts. RestoreBytes is what the restore read.
	Acquire      *time.Duration
	Modelled     []string
	Restore      *time.Duration
	RestoreBytes *int64
	Reprocessed  *int64
	CatchUp      *time.Duration
	// Earlier: the death of the process before this one (--resume). Its
	// detection, what it cut short and its catch-up are unknown here; only
	// the restore is measured.
	Earlier bool
	// Loss: a lost file, not a crash; billed, but not counted in Crashes.
	Loss bool
}

// Restored says recovery has restored what c cut short.
func (c *Crash) Restored() bool { return c.Restore != nil }

// unrecovered says no recovery ran for crash c before the run ended: it has
// neither a restore nor a catch-up (a crash that cut nothing short catches
// up at once, with nothing to restore). A lost file is not a crash.
func (c *Crash) unrecovered() bool { return !c.Loss && c.Restore == nil && c.CatchUp == nil }

// Bill is a run's crash bills in the order they were opened, the one
// accumulator every executor feeds. It has no lock: the executor's
// measuring harness holds its own while it opens and completes bills.
type Bill struct {
	// Start is the run's start, from which Recovery.AtMs counts; zero
	// leaves AtMs null.
	Start   time.Time
	crashes []*Crash
}

// Open opens the bill of a crash at at.
func (b *Bill) Open(cause string, at time.Time) *Crash {
	c := &Crash{Cause: cause, At: at}
	b.crashes = append(b.crashes, c)
	return c
}

// OpenLoss opens the bill of a lost file at at: recovered like a crash,
// but nothing crashed.
func (b *Bill) OpenLoss(cause string, at time.Time) *Crash {
	c := b.Open(cause, at)
	c.Loss = true
	return c
}

// ProcessDied opens the bill of the earlier process's death (--resume),
// standing at start, the start of this process; the first restore
// completes it.
func (b *Bill) ProcessDied(start time.Time) *Crash {
	c := b.Open(CauseProcessDied, start)
	c.Earlier = true
	return c
}

// Crashes counts the crashes billed, lost files left out.
func (b *Bill) Crashes() int {
	n := 0
	for _, c := range b.crashes {
		if !c.Loss {
			n++
		}
	}
	return n
}

// Recoveries is the summary's view of the bills. A crash no recovery ran
// for (the run ended first) says so in its cause, so that its null figures
// are not read as unmeasured.
func (b *Bill) Recoveries() []Recovery {
	var out []Recovery
	for _, c := range b.crashes {
		r := Recovery{Cause: c.Cause, DetectMs: MillisPtr(c.Detect), RestoreMs: MillisPtr(c.Restore),
			CatchUpMs: MillisPtr(c.CatchUp), AcquireMs: MillisPtr(c.Acquire),
			Modelled: append([]string{}, c.Modelled...)}
		if !b.Start.IsZero() {
			at := max(c.At.Sub(b.Start), 0)
			r.AtMs = MillisPtr(&at)
		}
		if c.RestoreBytes != nil {
			n := *c.RestoreBytes
			r.RestoreBytes = &n
		}
		if c.Reprocessed != nil {
			n := *c.Reprocessed
			r.ReprocessedRecords = &n
		}
		if c.unrecovered() {
			r.Cause += "; no recovery ran: the run ended first"
		}
		out = append(out, r)
	}
	return out
}
