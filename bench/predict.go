package bench

import "math"

// The catch-up prediction (derived in docs/bench/shapes.md):
//
// Input arrives at rate r records/s; the contestant can process c records/s
// when it has a backlog (its capacity, from Calibrate). At the fault the
// read position stops; it is put back to the restored recovery point, R
// records behind where the crash found it (the records it will read a
// second time); processing restarts D after the fault (detect + acquire +
// restore). At the restart the backlog is therefore
//
//	B = r·D + R
//
// records above the lag before the fault, and it drains at the surplus
// c − r, so
//
//	catch-up ≈ B / (c − r) = outage · r / (c − r)   with   outage = D + R/r,
//
// the outage being the time the input ran ahead of the processing: the
// time down plus the age of the recovery point at the fault (R/r, the
// input time the re-read records cover).

// Outage is the time the input ran ahead of the processing after a crash:
// downMs from the fault until processing restarted (detect + acquire +
// restore), plus the input time, at rate records/s, covered by the reread
// records. ok is false when it cannot be told (no rate, negative figures).
func Outage(downMs float64, reread int64, rate float64) (ms float64, ok bool) {
	if !(rate > 0) || downMs < 0 || reread < 0 || math.IsInf(downMs, 0) || math.IsInf(rate, 0) {
		return 0, false
	}
	return downMs + float64(reread)/rate*1000, true
}

// PredictCatchUp is outageMs · rate / (capacity − rate): how long a
// contestant with the given capacity needs to drain the backlog of an
// outage at the offered rate. ok is false when it never catches up
// (capacity ≤ rate) or a figure is missing or not finite.
func PredictCatchUp(outageMs, rate, capacity float64) (ms float64, ok bool) {
	if !(outageMs >= 0) || !(rate > 0) || !(capacity > rate) || math.IsInf(outageMs, 0) || math.IsInf(capacity, 0) {
		return 0, false
	}
	return outageMs * rate / (capacity - rate), true
}

// PredictedCatchUp fills f.PredictedCatchUpMs for a run offered rate
// records/s by a contestant of the given capacity, from the run's own
// bill: down time = detect + acquire + restore, the reread records. It
// leaves the figure nil when a part is missing or the prediction does not
// exist, and reports whether it set it.
func (f *Figures) PredictedCatchUp(rate, capacity float64) bool {
	f.PredictedCatchUpMs = nil
	outage, ok := f.outage(rate)
	if !ok {
		return false
	}
	ms, ok := PredictCatchUp(outage, rate, capacity)
	if !ok {
		return false
	}
	f.PredictedCatchUpMs = &ms
	return true
}

// outage is Outage of the run's bill at rate: detect + acquire + restore
// (a missing detect or acquire counts as none; without a restore the
// crash never restarted and there is no outage to tell), and the reread
// records.
func (f *Figures) outage(rate float64) (float64, bool) {
	if f.RestoreMs == nil {
		return 0, false
	}
	down := *f.RestoreMs
	for _, p := range []*float64{f.DetectMs, f.AcquireMs} {
		if p != nil {
			down += *p
		}
	}
	var reread int64
	if f.ReprocessedRecords != nil {
		reread = *f.ReprocessedRecords
	}
	return Outage(down, reread, rate)
}

// Predict fills PredictedCatchUpMs of every run at a load point whose
// contestant was calibrated (Results.Calibration), from the run's own
// bill and rate; other runs' predictions are left as they are.
func (r *Results) Predict() {
	if r.Scenario.Sweep != SweepLoad {
		return
	}
	caps := Capacities(r.Calibration)
	for i := range r.Runs {
		run := &r.Runs[i]
		if c, ok := caps[run.Contestant]; ok && run.SweepPoint != "" {
			run.Figures.PredictedCatchUp(run.Rate, c)
		}
	}
}

// predictionCurve is catch-up / outage = load / (1 − load) as a function
// of headroom h = 1 − load: (1 − h) / h, the curve every contestant's
// normalised catch-up should lie on.
func predictionCurve(h float64) float64 { return (1 - h) / h }
