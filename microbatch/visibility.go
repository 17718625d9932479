package microbatch

import (
	"sync"
	"time"

	"github.com/rewind-engine/rewind/dataflow/sink"
)

// batchVisibility is when one batch's rows are visible: once every sink
// subtask's flushed rows are. A sink that rolls in-progress files
// (sink.VisibleFlusher) says so when it publishes them, which can be after
// the batch committed, so the batch's latency is recorded then.
type batchVisibility struct {
	mu     sync.Mutex
	left   int
	last   time.Time
	record func(visible time.Time)
}

func newBatchVisibility(subtasks int) *batchVisibility { return &batchVisibility{left: subtasks} }

// flush flushes w for batch n and notes when its rows are visible.
func (v *batchVisibility) flush(w sink.Writer, n int64) error {
	if vf, ok := w.(sink.VisibleFlusher); ok {
		return vf.FlushVisible(n, v.visible)
	}
	if err := w.Flush(n); err != nil {
		return err
	}
	v.visible(time.Now())
	return nil
}

// visible notes one subtask's rows visible at at.
func (v *batchVisibility) visible(at time.Time) {
	v.mu.Lock()
	v.left--
	if at.After(v.last) {
		v.last = at
	}
	v.fire()
}

// whenVisible calls record with the batch's visibility time once known.
func (v *batchVisibility) whenVisible(record func(visible time.Time)) {
	v.mu.Lock()
	v.record = record
	v.fire()
}

// fire calls record once every subtask is visible; v.mu held, and
// released before the call.
func (v *batchVisibility) fire() {
	if v.left > 0 || v.record == nil {
		v.mu.Unlock()
		return
	}
	r, at := v.record, v.last
	v.record = nil
	v.mu.Unlock()
	r(at)
}
