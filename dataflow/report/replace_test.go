package report

import (
	"context"
	"slices"
	"testing"
	"time"
)

// Modelled delays are waited out from the crash, detect then acquire, and
// the bill names them; without them detection is what the executor noticed.
func TestReplacementWait(t *testing.T) {
	var b Bill
	b.Start = time.Now()
	c := b.Open("worker 0 killed", b.Start.Add(time.Millisecond))
	ready := Replacement{Detect: 20 * time.Millisecond, Acquire: 10 * time.Millisecond}.Wait(context.Background(), c, c.At)
	if *c.Detect < 19*time.Millisecond || *c.Acquire < 10*time.Millisecond || ready.Before(c.At.Add(*c.Detect+*c.Acquire)) {
		t.Fatalf("detect %v acquire %v ready %v after the crash", *c.Detect, *c.Acquire, ready.Sub(c.At))
	}
	r := b.Recoveries()[0]
	if !slices.Equal(r.Modelled, []string{ModelledDetect, ModelledAcquire}) || *r.AcquireMs < 10 || *r.AtMs != 1 {
		t.Fatalf("recovery %+v", r)
	}

	plain := b.Open("worker 1 killed", time.Now())
	noticed := plain.At.Add(5 * time.Millisecond)
	if got := (Replacement{}).Wait(context.Background(), plain, noticed); !got.Equal(noticed) {
		t.Fatalf("unmodelled replacement ready at %v, want when noticed", got.Sub(noticed))
	}
	if *plain.Detect != 5*time.Millisecond || *plain.Acquire != 0 || len(plain.Modelled) != 0 {
		t.Fatalf("unmodelled bill detect %v acquire %v modelled %v", *plain.Detect, *plain.Acquire, plain.Modelled)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cut := b.Open("worker 2 killed", time.Now())
	if ready := (Replacement{Detect: time.Hour, Acquire: time.Hour}).Wait(ctx, cut, cut.At); ready.Sub(cut.At) > time.Minute {
		t.Fatalf("a cancelled wait took %v", ready.Sub(cut.At))
	}
}
