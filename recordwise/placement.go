package recordwise

// This file holds where tasks run with --workers process, and which of
// the plan's channels cross from one worker process to another. Both are
// derived from the plan and the number of workers alone, so a worker
// process computes the same placement from its Welcome as its
// coordinator, and refuses to start if it does not.

import (
	"fmt"
	"sort"
	"strconv"
)

// workerOf is the worker process subtask sub of every chain runs on:
// sub mod n. With n equal to the parallelism (what Workers says) worker w
// runs subtask w of every chain, as a simulated worker does, so --fail
// worker=W kills the same tasks in both modes.
func workerOf(sub, n int) int { return sub % n }

// link is one channel of the plan: from subtask fromSub of chain from to
// input channel ch of subtask toSub of chain to. Its id is its position in
// plan order (chain, consumer subtask, input channel) plus one, the same
// on every side; it names the wire data channel when the link crosses
// processes.
type link struct {
	id           uint32
	from, to     *chain
	fromSub      int
	toSub, input int
}

// name is the link's description, as in a trace: sender->receiver.
func (l link) name() string {
	return channelName(taskLane(l.from, l.fromSub), taskLane(l.to, l.toSub))
}

// links lists every channel of the plan in plan order.
func (pl *plan) links() []link {
	p := pl.parallelism
	var out []link
	for _, c := range pl.chains {
		for sub := 0; sub < p; sub++ {
			for ch := 0; ch < c.inputChannels(p); ch++ {
				_, from := c.channelPort(ch, sub, p)
				var in *chainInput
				for _, ci := range c.inputs {
					if ch >= ci.first && ch < ci.first+ci.channels(p) {
						in = ci
					}
				}
				out = append(out, link{id: uint32(len(out) + 1), from: in.from, to: c, fromSub: from, toSub: sub, input: ch})
			}
		}
	}
	return out
}

// crossing are the links between different worker processes of n.
func (pl *plan) crossing(n int) []link {
	var out []link
	for _, l := range pl.links() {
		if workerOf(l.fromSub, n) != workerOf(l.toSub, n) {
			out = append(out, l)
		}
	}
	return out
}

// placementOf describes what worker w of n runs and exchanges, one line
// per task and per crossing link, sorted: a worker compares its own with
// the coordinator's before it says it is ready.
func (pl *plan) placementOf(w, n int) []string {
	var out []string
	for _, c := range pl.chains {
		for sub := 0; sub < pl.parallelism; sub++ {
			if workerOf(sub, n) == w {
				out = append(out, "task "+taskLane(c, sub))
			}
		}
	}
	for _, l := range pl.crossing(n) {
		switch w {
		case workerOf(l.fromSub, n):
			out = append(out, "send "+strconv.Itoa(int(l.id))+" "+l.name())
		case workerOf(l.toSub, n):
			out = append(out, "receive "+strconv.Itoa(int(l.id))+" "+l.name())
		}
	}
	sort.Strings(out)
	return out
}

// checkWorkers refuses a worker count the placement cannot use.
func (pl *plan) checkWorkers(n int) error {
	if n < 1 || n > pl.parallelism {
		return fmt.Errorf("%d worker processes for parallelism %d: allowed are 1..%d", n, pl.parallelism, pl.parallelism)
	}
	if k := len(pl.links()); k >= 1<<16 {
		return fmt.Errorf("%d channels between tasks: worker processes carry at most %d", k, 1<<16-1)
	}
	return nil
}
