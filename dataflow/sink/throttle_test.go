package sink

import (
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
)

// TestThrottle: writers of every mode together take rows at no more than
// the throttle's rate, and every row still arrives.
func TestThrottle(t *testing.T) {
	for _, mode := range Modes {
		t.Run(string(mode), func(t *testing.T) {
			r, seed := newRand(t)
			f := newFixture(t)
			s := f.open(mode, CSV)
			defer s.Close()
			// 1,200 rows at 4,000 rows/s take 0.3 s, whichever of three
			// writers writes them.
			const rate, writers, batches, per = 4000.0, 3, 4, 100
			if err := Throttle(s, rate); err != nil {
				t.Fatal(err)
			}
			g := newGen(r, 50, writers*batches*per)
			rows := make([][][]int64, writers)
			var all [][]int64
			for i := range rows {
				for range batches {
					b := g.rows(per)
					rows[i] = append(rows[i], b...)
					all = append(all, b...)
				}
			}
			ws := make([]Writer, writers)
			for i := range ws {
				ws[i] = f.writer(s, i, 0)
			}
			start := time.Now()
			var wg sync.WaitGroup
			errs := make([]error, writers)
			for i, w := range ws {
				// Batches built here: t.Fatal belongs to the test's goroutine.
				bs := make([]arrow.RecordBatch, batches)
				for b := range bs {
					bs[b] = batchOf(t, f.mem, f.layout, rows[i][b*per:(b+1)*per], nil)
				}
				wg.Go(func() {
					for _, b := range bs {
						if err := w.Write(0, b); err != nil && errs[i] == nil {
							errs[i] = err
						}
						b.Release()
					}
				})
			}
			wg.Wait()
			for i, err := range errs {
				must(t, err, fmt.Sprintf("writer %d", i))
			}
			took := time.Since(start)
			want := time.Duration(float64(writers*batches*per) / rate * float64(time.Second))
			if took < want*9/10 {
				t.Fatalf("seed %d: %d rows took %v at %v rows/s, want at least %v", seed, writers*batches*per, took, rate, want)
			}
			for i, w := range ws {
				must(t, w.Flush(0), fmt.Sprintf("flush %d", i))
				must(t, w.Close(), "close")
			}
			must(t, s.Commit(0), "commit")
			must(t, s.Finish(), "finish")
			f.wantResolved(all)
		})
	}
}

// TestThrottleOff: without a throttle (or with 0) a write does not wait.
func TestThrottleOff(t *testing.T) {
	r, _ := newRand(t)
	f := newFixture(t)
	s := f.open(Append, CSV)
	defer s.Close()
	must(t, Throttle(s, 1), "throttle")
	must(t, Throttle(s, 0), "unthrottle")
	w := f.writer(s, 0, 0)
	start := time.Now()
	f.write(w, 0, newGen(r, 10, 1000).rows(1000))
	if took := time.Since(start); took > time.Second {
		t.Fatalf("an unthrottled write of 1,000 rows took %v", took)
	}
	must(t, w.Close(), "close")
}

// TestThrottleClose: closing the writer or the sink ends a throttle wait
// at once, and the write then fails as one to a closed writer.
func TestThrottleClose(t *testing.T) {
	for _, what := range []string{"writer", "sink"} {
		t.Run(what, func(t *testing.T) {
			r, _ := newRand(t)
			f := newFixture(t)
			s := f.open(Append, CSV)
			defer s.Close()
			// One row a second: the 100-row write would wait 100 s.
			must(t, Throttle(s, 1), "throttle")
			w := f.writer(s, 0, 0)
			rows := newGen(r, 10, 100).rows(100)
			b := batchOf(t, f.mem, f.layout, rows, nil)
			defer b.Release()
			errc := make(chan error, 1)
			go func() { errc <- w.Write(0, b) }()
			time.Sleep(50 * time.Millisecond) // usually inside the throttle wait by now; if not, the write comes after Close and must fail all the same
			if what == "writer" {
				must(t, w.Close(), "close writer")
			} else {
				must(t, s.Close(), "close sink")
			}
			select {
			case err := <-errc:
				if err == nil {
					t.Fatal("a write ended by Close succeeded")
				}
			case <-time.After(5 * time.Second):
				t.Fatal("closing the " + what + " did not end the throttle wait")
			}
		})
	}
}

func TestThrottleRefuses(t *testing.T) {
	f := newFixture(t)
	s := f.open(Append, CSV)
	defer s.Close()
	for _, v := range []float64{-1, math.NaN(), math.Inf(1)} {
		if err := Throttle(s, v); err == nil {
			t.Errorf("Throttle(%v) accepted", v)
		}
	}
}

// TestPacer: reservations queue one after another at the rate, and an
// idle sink earns no burst.
func TestPacer(t *testing.T) {
	p := pacer{rate: 1000}
	t0 := time.Unix(100, 0)
	for i, want := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond} {
		if got := p.reserve(100, t0); got != want {
			t.Fatalf("reservation %d waits %v, want %v", i, got, want)
		}
	}
	// Long after the queue drained: only the new rows' own time.
	if got := p.reserve(10, t0.Add(time.Minute)); got != 10*time.Millisecond {
		t.Fatalf("after idling a reservation waits %v, want 10ms", got)
	}
	if got := (&pacer{}).reserve(1e6, t0); got != 0 {
		t.Fatalf("no rate waits %v", got)
	}
}
