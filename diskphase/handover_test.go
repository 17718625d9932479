package diskphase

import (
	"math"
	"testing"
	"time"
)

// TestHandoverStampsBounded stamps a long finite job's worth of read
// batches on one split: the log never holds more than maxStamps, every
// record is still counted once when the job commits, and the mean latency
// is the exact one.
func TestHandoverStampsBounded(t *testing.T) {
	h := newHandoverLog()
	t0 := time.Unix(1000, 0)
	const batches, per = 1 << 20, 8
	var sumT float64 // seconds after t0, summed over records
	most := 0
	for i := range batches {
		at := t0.Add(time.Duration(i) * time.Microsecond)
		h.stamp(0, int64(i*per), int64((i+1)*per), at)
		sumT += float64(per) * at.Sub(t0).Seconds()
		most = max(most, len(h.split[0].stamps))
	}
	if most > maxStamps {
		t.Fatalf("the log held %d stamps of split 0, more than %d", most, maxStamps)
	}
	now := t0.Add(10 * time.Second)
	var n int64
	var sumLat float64
	// Half of the records first (a stamp is cut at the job's end), then
	// the rest.
	half := int64(batches * per / 2)
	for _, end := range []int64{half + 3, batches * per} {
		h.visible([]int64{end}, now, func(d time.Duration, k int64) {
			n += k
			sumLat += float64(k) * d.Seconds()
		})
	}
	if n != batches*per {
		t.Fatalf("%d records made visible, want %d", n, batches*per)
	}
	want := now.Sub(t0).Seconds() - sumT/float64(n)
	if got := sumLat / float64(n); math.Abs(got-want) > 1e-3 {
		t.Fatalf("mean latency %.6f s, want %.6f s", got, want)
	}
	if left := len(h.split[0].stamps); left != 0 {
		t.Fatalf("%d stamps left after every record became visible", left)
	}
}

// TestHandoverStampsGaps: ranges with gaps between them (records a
// forgetful input lost) never merge, so no lost record is counted as
// visible.
func TestHandoverStampsGaps(t *testing.T) {
	h := newHandoverLog()
	t0 := time.Unix(1000, 0)
	const batches = 3 * maxStamps
	for i := range batches {
		h.stamp(0, int64(10*i), int64(10*i+4), t0.Add(time.Duration(i)*time.Millisecond))
	}
	var n int64
	h.visible([]int64{10 * batches}, t0.Add(time.Hour), func(_ time.Duration, k int64) { n += k })
	if n != 4*batches {
		t.Fatalf("%d records made visible, want %d (the gaps counted?)", n, 4*batches)
	}
}
