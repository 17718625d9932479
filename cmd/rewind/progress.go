package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
	"golang.org/x/term"

	"github.com/rewind-engine/rewind/dataflow/report"
	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/source"
)

// Values of --progress.
const (
	progressAuto = "auto" // a bar when stderr is a terminal, else nothing
	progressBar  = "bar"
	progressJSON = "json"
	progressNone = "none"
)

// isTerminal reports whether w is a terminal a progress bar can redraw:
// one with a known width (some ptys report 0×0, and a bar drawn to fit
// zero columns shows nothing).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return false
	}
	width, _, err := term.GetSize(int(f.Fd()))
	return err == nil && width > 0
}

// logSwitch is where the run's log lines go. While a bar is drawn they are
// held and handed to the bar, which prints them above itself (a line
// written straight to the terminal would be erased by the bar's next
// redraw); holding them costs the logging goroutine nothing, where the
// bar's own writer would block it until the next redraw.
type logSwitch struct {
	mu      sync.Mutex
	out     io.Writer
	holding bool
	held    []byte
}

func (l *logSwitch) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.holding {
		l.held = append(l.held, p...)
		return len(p), nil
	}
	return l.out.Write(p)
}

// hold starts holding lines.
func (l *logSwitch) hold() {
	l.mu.Lock()
	l.holding = true
	l.mu.Unlock()
}

// take returns the lines held so far.
func (l *logSwitch) take() []byte {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.held
	l.held = nil
	return b
}

// release writes what is still held to out and stops holding.
func (l *logSwitch) release() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.held) > 0 {
		_, _ = l.out.Write(l.held)
	}
	l.held, l.holding = nil, false
}

// runProgress draws a run's progress on stderr while it runs: records read
// (against the input's size when the sources know it), the read rate,
// recovery points completed and crashes. Records read count replays, so
// after a crash the count runs past the input's size; the bar grows with it.
type runProgress struct {
	p      *mpb.Progress
	bar    *mpb.Bar
	faults interface{ RecordsRead() int64 }
	events eventCounter
	total  int64
	stop   chan struct{}
	done   sync.WaitGroup

	logs *logSwitch

	mu        sync.Mutex // guards what update leaves for describe
	read      int64
	last      time.Time // of the last update
	rate      float64   // records/s since the update before
	finishing bool      // the whole input is read and nothing more comes
}

// startProgress starts the bar for env's run on w, holding the run's log
// lines (logs) to print them above it. Progress events reach the bar
// through env.Config.Progress, which it takes over (--progress json is the
// other use of that writer, so the two exclude each other).
func startProgress(w io.Writer, logs *logSwitch, env *run.Env) *runProgress {
	var total int64
	for _, s := range env.Sources {
		sz, ok := s.(source.Sized)
		if !ok || sz.Records() == 0 || env.Config.Resumed {
			// A resumed run reads from its recovery point on: a total
			// would show it short of the end when it is done.
			total = 0
			break
		}
		total += sz.Records()
	}
	rp := &runProgress{faults: env.Faults, total: total, stop: make(chan struct{}), logs: logs, last: time.Now()}
	env.Config.Progress = rp.events.writer()
	// Refreshed by the poller below, so the same code draws on a terminal
	// and into a file; the width applies where the terminal's is unknown.
	refresh := time.Second
	if isTerminal(w) {
		refresh = 200 * time.Millisecond
	} else {
		w = struct{ io.Writer }{w} // a file, a pipe or a 0×0 pty: mpb must not redraw in place
	}
	rp.p = mpb.New(mpb.WithOutput(w), mpb.WithWidth(120), mpb.WithRefreshRate(refresh), mpb.WithAutoRefresh())
	logs.hold()
	counts := decor.Any(func(decor.Statistics) string { return rp.describe() }, decor.WCSyncSpaceR)
	name := decor.Name(env.Config.Executor + " ")
	if total > 0 {
		rp.bar = rp.p.New(total, mpb.BarStyle().Lbound("[").Rbound("]"), mpb.BarWidth(30),
			mpb.PrependDecorators(name), mpb.AppendDecorators(counts))
	} else {
		rp.bar = rp.p.New(0, mpb.SpinnerStyle(), mpb.PrependDecorators(name), mpb.AppendDecorators(counts))
	}
	rp.done.Add(1)
	go func() {
		defer rp.done.Done()
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-rp.stop:
				return
			case <-t.C:
				rp.update(true)
				rp.printLogs()
			}
		}
	}()
	return rp
}

// printLogs hands the log lines held since the last tick to the bar.
func (rp *runProgress) printLogs() {
	if b := rp.logs.take(); len(b) > 0 {
		_, _ = rp.p.Write(b)
	}
}

// update moves the bar to the records read so far; withRate also measures
// the read rate since the update before.
func (rp *runProgress) update(withRate bool) {
	read := rp.faults.RecordsRead()
	rp.mu.Lock()
	if now := time.Now(); withRate {
		rp.rate = float64(read-rp.read) / max(now.Sub(rp.last).Seconds(), 1e-3)
		rp.last = now
	}
	rp.finishing = rp.total > 0 && read >= rp.total && read == rp.read
	rp.read = read
	rp.mu.Unlock()
	if read > rp.total && rp.total > 0 {
		rp.bar.SetTotal(read, false)
	}
	rp.bar.SetCurrent(read)
}

// describe is the text after the bar.
func (rp *runProgress) describe() string {
	rp.mu.Lock()
	read, rate, finishing := rp.read, rp.rate, rp.finishing
	rp.mu.Unlock()
	e := rp.events.snapshot()
	var text string
	switch {
	case rp.total == 0:
		text = fmt.Sprintf("%s read", countText(read))
	case read <= rp.total:
		text = fmt.Sprintf("%s/%s read", countText(read), countText(rp.total))
	default: // replays are read again
		text = fmt.Sprintf("%s read (%s + replays)", countText(read), countText(rp.total))
	}
	if finishing {
		text += ", finishing output"
	} else {
		text += fmt.Sprintf(", %s/s", countText(int64(rate)))
	}
	text += ", " + plural(e.points, "recovery point")
	if e.crashes > 0 {
		text += ", " + plural(e.crashes, "crash")
	}
	return text
}

// finish ends the bar, complete after a finished run and left where it
// stopped otherwise, and waits until it is drawn.
// Log lines still held are printed, above the bar or after it.
func (rp *runProgress) finish(complete bool) {
	close(rp.stop)
	rp.done.Wait()
	rp.update(false)
	rp.printLogs()
	if complete {
		rp.bar.SetTotal(-1, true) // the total becomes what was read
	} else {
		rp.bar.Abort(false)
	}
	rp.p.Wait()
	rp.logs.release()
}

// plural writes "1 crash", "2 crashes".
func plural(n int, noun string) string {
	switch {
	case n == 1:
		return "1 " + noun
	case noun[len(noun)-1] == 'h':
		return fmt.Sprintf("%d %ses", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// countText writes a count the way a person reads it: 950, 12.3k, 4.56M.
func countText(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2fG", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.2fM", float64(n)/1e6)
	case n >= 1e4:
		return fmt.Sprintf("%.1fk", float64(n)/1e3)
	}
	return fmt.Sprint(n)
}

// eventCounter counts the executor's progress events the bar shows.
type eventCounter struct {
	mu sync.Mutex
	c  eventCounts
}

type eventCounts struct{ points, crashes int }

// writer returns the io.Writer the executor's events go to.
func (ec *eventCounter) writer() io.Writer {
	return report.NewEventWriter(func(event string, line []byte) {
		var e struct {
			Status string `json:"status"`
		}
		_ = json.Unmarshal(line, &e)
		ec.mu.Lock()
		defer ec.mu.Unlock()
		switch {
		case event == "crash":
			ec.c.crashes++
		case event == "checkpoint" && e.Status == "completed", event == "batch" && e.Status != "failed" && e.Status != "aborted", event == "job_committed":
			ec.c.points++
		}
	})
}

func (ec *eventCounter) snapshot() eventCounts {
	ec.mu.Lock()
	defer ec.mu.Unlock()
	return ec.c
}
