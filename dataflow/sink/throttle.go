package sink

import (
	"fmt"
	"math"
	"sync"
	"time"
)

// A throttled sink stands for a destination slower than the engine (a
// database taking so many rows a second): Write waits until the rows fit
// the rate, shared by every writer of the sink. The wait is what makes
// backpressure: an executor's sink tasks fall behind, its queues fill up,
// and the recovery points that must wait for in-flight data (aligned
// checkpoints) slow down as the load nears the rate.

// Throttle limits every writer of s together to rowsPerSecond rows a
// second; 0 removes the limit. It applies to writers handed out before
// and after the call. Every sink Open returns supports it.
func Throttle(s Sink, rowsPerSecond float64) error {
	t, ok := s.(interface{ setThrottle(float64) })
	if !ok {
		return fmt.Errorf("sink %T cannot be throttled", s)
	}
	if math.IsNaN(rowsPerSecond) || math.IsInf(rowsPerSecond, 0) || rowsPerSecond < 0 {
		return fmt.Errorf("sink throttle %v rows/s: must be a finite number, 0 or more", rowsPerSecond)
	}
	t.setThrottle(rowsPerSecond)
	return nil
}

// pacer hands out the sink's time: n rows take n/rate seconds, one batch
// after another, whichever writer asks.
type pacer struct {
	mu   sync.Mutex
	rate float64
	// next is when the rows reserved so far have been taken in; never
	// in the past when a reservation starts, so an idle sink earns no
	// burst.
	next time.Time
}

func (b *base) setThrottle(rowsPerSecond float64) {
	b.pace.mu.Lock()
	b.pace.rate = rowsPerSecond
	b.pace.mu.Unlock()
}

// reserve books n rows and returns how long the caller must wait until
// the sink has taken them in (0 without a throttle).
func (p *pacer) reserve(n int64, now time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.rate <= 0 || n <= 0 {
		return 0
	}
	if p.next.Before(now) {
		p.next = now
	}
	p.next = p.next.Add(time.Duration(float64(n) / p.rate * float64(time.Second)))
	return p.next.Sub(now)
}

// throttle waits until the sink has room for n rows, or until the sink
// or the writer is closed (a killed worker's writer, a run stopped).
func (w *writerBase) throttle(n int64) {
	d := w.sink.pace.reserve(n, time.Now())
	if d <= 0 {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-w.sink.done:
	case <-w.stop:
	}
}
