package eventtime

import (
	"testing"

	"github.com/rewind-engine/rewind/dataflow/operator"
)

func TestWatermarkIsMinOfMaxMinusDisorder(t *testing.T) {
	tr := NewTracker(2, 5)
	if got := tr.Watermark(); got != operator.NoWatermark {
		t.Fatalf("empty tracker: watermark %d, want NoWatermark", got)
	}
	tr.ObserveTS(0, 100)
	if got := tr.Watermark(); got != operator.NoWatermark {
		t.Fatalf("one partition silent: watermark %d, want NoWatermark", got)
	}
	tr.ObserveTS(1, 40)
	tr.ObserveTS(1, 30) // out of order: max stays 40
	if got := tr.Watermark(); got != 35 {
		t.Fatalf("watermark %d, want min(100,40)-5 = 35", got)
	}
	tr.Finish(1)
	if got := tr.Watermark(); got != 95 {
		t.Fatalf("after partition 1 ends: watermark %d, want 95", got)
	}
	s := tr.State()
	tr.Finish(0)
	if got := tr.Watermark(); got != operator.EndOfTime {
		t.Fatalf("all done: watermark %d, want EndOfTime", got)
	}
	r := NewTracker(2, 5)
	if !r.Restore(s) || r.Watermark() != 95 {
		t.Fatalf("restored watermark %d, want 95", r.Watermark())
	}
	if NewTracker(3, 0).Restore(s) {
		t.Fatal("restore into a tracker with another partition count must fail")
	}
}

func TestWatermarkSaturatesInsteadOfWrapping(t *testing.T) {
	tr := NewTracker(1, 10)
	tr.ObserveTS(0, operator.NoWatermark+3)
	if got := tr.Watermark(); got != operator.NoWatermark {
		t.Fatalf("watermark %d, want NoWatermark (not a wrapped-around value)", got)
	}
}
