package recordwise

// This file carries a named crash point a task reaches in a worker
// process (--workers process) to the coordinator, which holds the run's
// faults: it counts every occurrence, across tasks and restarts, and
// decides. A task asks only at the points some fault names
// (procConfig.AskPoints); at the others it passes at no cost. The task
// waits for the answer: go on, fail with an error, or be killed there,
// which the coordinator carries out with a SIGKILL of the process.

import (
	"context"
	"errors"
	"slices"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/wire"
	"github.com/rewind-engine/rewind/recordwise/checkpoint"
)

// pointAsker is a worker process's side of the questions.
type pointAsker struct {
	conn    *wire.Conn
	asks    []string
	pending wire.Pending[procMsg]
}

func newPointAsker(c *wire.Conn, asks []string) *pointAsker {
	return &pointAsker{conn: c, asks: asks}
}

// ask passes point name as task where of worker in attempt: nil to go on.
// Killed there, it returns only once the attempt ends (the SIGKILL comes
// first), so the task does nothing past the point.
func (a *pointAsker) ask(ctx context.Context, attempt int, name string, worker int, where checkpoint.TaskID) error {
	if !slices.Contains(a.asks, name) {
		return nil
	}
	id, ch := a.pending.Add()
	defer a.pending.Forget(id)
	if err := sendMsg(a.conn, procMsg{Op: opPoint, Attempt: attempt, ID: id, Text: name, Task: string(where), Subtask: worker}); err != nil {
		return err
	}
	select {
	case m := <-ch:
		switch {
		case m.Killed:
			<-ctx.Done()
			return ctx.Err()
		case m.Text != "":
			return errors.New(m.Text)
		}
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// answered hands the coordinator's answer to the task waiting for it.
func (a *pointAsker) answered(m procMsg) { a.pending.Deliver(m.ID, m) }

// answerPoint decides a worker's point m for the running attempt inc, as
// reach does for a simulated worker's task, and answers it; a crash of
// the asking worker is carried out (its SIGKILL) before the answer.
func (pc *procCoord) answerPoint(s *run.FleetSlot, inc *incarnation, m procMsg) {
	reply := procMsg{Op: opPointAnswer, Attempt: m.Attempt, ID: m.ID}
	err := inc.reach(m.Text, m.Subtask, checkpoint.TaskID(m.Task))
	if cr, ok := fault.AsCrash(err); ok {
		inc.crash(cr, checkpoint.TaskID(m.Task))
		reply.Killed = true
	} else if err != nil {
		reply.Text = err.Error()
	}
	_ = sendMsg(s.Conn, reply)
}
