package bench

import (
	"math"
	"testing"
)

func pointTo[T any](v T) *T { return &v }

func TestOutage(t *testing.T) {
	for _, tc := range []struct {
		down   float64
		reread int64
		rate   float64
		want   float64
		ok     bool
	}{
		{down: 750, reread: 0, rate: 1000, want: 750, ok: true},
		// 5,000 records re-read at 10,000 records/s are 500 ms of input.
		{down: 750, reread: 5000, rate: 10000, want: 1250, ok: true},
		{down: 0, reread: 2000, rate: 4000, want: 500, ok: true},
		{down: 100, reread: 1, rate: 0, ok: false},
		{down: 100, reread: 1, rate: -5, ok: false},
		{down: 100, reread: 1, rate: math.NaN(), ok: false},
		{down: -1, reread: 1, rate: 10, ok: false},
		{down: 1, reread: -1, rate: 10, ok: false},
		{down: math.Inf(1), reread: 1, rate: 10, ok: false},
	} {
		got, ok := Outage(tc.down, tc.reread, tc.rate)
		if ok != tc.ok || (ok && math.Abs(got-tc.want) > 1e-9) {
			t.Errorf("Outage(%v, %v, %v) = %v, %v; want %v, %v", tc.down, tc.reread, tc.rate, got, ok, tc.want, tc.ok)
		}
	}
}

func TestPredictCatchUp(t *testing.T) {
	for _, tc := range []struct {
		outage, rate, capacity float64
		want                   float64
		ok                     bool
	}{
		// 50 % load: the surplus equals the rate, catch-up = outage.
		{outage: 1000, rate: 50000, capacity: 100000, want: 1000, ok: true},
		// 80 %: four times the outage.
		{outage: 1000, rate: 80000, capacity: 100000, want: 4000, ok: true},
		// 95 %: nineteen times.
		{outage: 200, rate: 95, capacity: 100, want: 3800, ok: true},
		{outage: 0, rate: 10, capacity: 20, want: 0, ok: true},
		// At or over capacity the backlog never drains.
		{outage: 1000, rate: 100, capacity: 100, ok: false},
		{outage: 1000, rate: 120, capacity: 100, ok: false},
		{outage: 1000, rate: 0, capacity: 100, ok: false},
		{outage: -1, rate: 10, capacity: 100, ok: false},
		{outage: math.NaN(), rate: 10, capacity: 100, ok: false},
		{outage: 10, rate: 10, capacity: math.Inf(1), ok: false},
	} {
		got, ok := PredictCatchUp(tc.outage, tc.rate, tc.capacity)
		if ok != tc.ok || (ok && math.Abs(got-tc.want) > 1e-9) {
			t.Errorf("PredictCatchUp(%v, %v, %v) = %v, %v; want %v, %v", tc.outage, tc.rate, tc.capacity, got, ok, tc.want, tc.ok)
		}
	}
}

func TestFiguresPredictedCatchUp(t *testing.T) {
	// detect 500 + acquire 250 + restore 250 = 1 s down, 20,000 records
	// re-read at 40,000 records/s = 0.5 s: outage 1.5 s; at 80 % load of
	// 50,000 records/s catch-up ≈ 1.5 s × 4 = 6 s.
	f := Figures{DetectMs: pointTo(500.0), AcquireMs: pointTo(250.0), RestoreMs: pointTo(250.0), ReprocessedRecords: pointTo(int64(20000))}
	if !f.PredictedCatchUp(40000, 50000) || f.PredictedCatchUpMs == nil || math.Abs(*f.PredictedCatchUpMs-6000) > 1e-6 {
		t.Fatalf("predicted %v, want 6000 ms", f.PredictedCatchUpMs)
	}
	// Without detect/acquire figures they count as zero; without a
	// reprocess count nothing was re-read.
	g := Figures{RestoreMs: pointTo(100.0)}
	if !g.PredictedCatchUp(500, 1000) || *g.PredictedCatchUpMs != 100 {
		t.Fatalf("predicted %v, want 100 ms", g.PredictedCatchUpMs)
	}
	// No restore figure (the crash never restored), or over capacity: nil,
	// and a stale figure is cleared.
	h := Figures{PredictedCatchUpMs: pointTo(1.0)}
	if h.PredictedCatchUp(500, 1000) || h.PredictedCatchUpMs != nil {
		t.Fatalf("predicted %v without a restore", h.PredictedCatchUpMs)
	}
	f.PredictedCatchUpMs = pointTo(1.0)
	if f.PredictedCatchUp(60000, 50000) || f.PredictedCatchUpMs != nil {
		t.Fatalf("predicted %v over capacity", f.PredictedCatchUpMs)
	}
}

func TestPredictionCurve(t *testing.T) {
	for h, want := range map[float64]float64{0.5: 1, 0.2: 4, 0.05: 19} {
		if got := predictionCurve(h); math.Abs(got-want) > 1e-9 {
			t.Errorf("predictionCurve(%v) = %v, want %v", h, got, want)
		}
	}
}
