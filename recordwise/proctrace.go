package recordwise

// This file takes what a traced worker process draws to its coordinator
// (rewind trace --workers process): the worker's tasks record on a
// recorder of the worker's own, on the coordinator's clock
// (procConfig.TraceStart), and what they drew is sent every
// traceForwardEvery, before each event for the checkpoint coordinator and
// when the worker ends. The coordinator merges it into the run's diagram
// (procCoord.handle). A worker SIGKILLed loses what it drew since its last
// send: at most traceForwardEvery of its events, which died with it.

import (
	"time"

	"github.com/rewind-engine/rewind/dataflow/spacetime"
	"github.com/rewind-engine/rewind/dataflow/wire"
)

// traceForwardEvery is how often a traced worker sends what it drew.
const traceForwardEvery = 50 * time.Millisecond

// sendTrace sends what tr drew since its last Drain, if anything (tr nil:
// not traced).
func sendTrace(c *wire.Conn, tr *spacetime.Recorder) {
	if tr == nil {
		return
	}
	if f := tr.Drain(); !f.Empty() {
		_ = sendMsg(c, procMsg{Op: opTrace, Trace: &f})
	}
}

// forwardTrace sends the worker's drawing every traceForwardEvery until
// the returned stop, which sends the rest.
func (pw *procWorker) forwardTrace() (stop func()) {
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() {
		defer close(exited)
		t := time.NewTicker(traceForwardEvery)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				sendTrace(pw.conn, pw.env.Trace)
			case <-done:
				return
			}
		}
	}()
	return func() {
		close(done)
		<-exited
		sendTrace(pw.conn, pw.env.Trace)
	}
}
