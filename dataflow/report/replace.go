package report

import (
	"context"
	"time"
)

// Parts of recovery that Crash.Modelled can name.
const (
	ModelledDetect  = "detect"
	ModelledAcquire = "acquire"
)

// Replacement is the modelled part of getting a dead worker replaced, the
// same in every executor: a heartbeat timeout (Detect) and the time to
// obtain a new worker (Acquire). A zero Detect is not modelled: detection
// is then what the executor measures; a zero Acquire is none.
type Replacement struct {
	Detect, Acquire time.Duration
}

// Wait waits out the modelled delays for crash c, which the executor
// noticed at noticed: Detected, then Acquired. It returns the moment the
// replacement is ready, from which the executor measures its restore, so
// that At+Detect+Acquire+Restore is the moment processing restarts. An
// executor that tears the job down between the two calls them apart.
func (r Replacement) Wait(ctx context.Context, c *Crash, noticed time.Time) time.Time {
	return r.Acquired(ctx, c, r.Detected(ctx, c, noticed))
}

// Detected waits until the crash is declared dead, no earlier than
// c.At+Detect when Detect is modelled, and fills c.Detect (and
// c.Modelled). It returns the moment of detection. A cancelled ctx cuts
// the wait short.
func (r Replacement) Detected(ctx context.Context, c *Crash, noticed time.Time) time.Time {
	detected := noticed
	if r.Detect > 0 {
		sleepUntil(ctx, c.At.Add(r.Detect))
		if now := time.Now(); now.After(detected) {
			detected = now
		}
		c.Modelled = append(c.Modelled, ModelledDetect)
	}
	d := max(detected.Sub(c.At), 0)
	c.Detect = &d
	return detected
}

// Acquired waits out Acquire from detected, fills c.Acquire (and
// c.Modelled) and returns the moment the replacement is ready.
func (r Replacement) Acquired(ctx context.Context, c *Crash, detected time.Time) time.Time {
	acquired := detected
	if r.Acquire > 0 {
		sleepUntil(ctx, detected.Add(r.Acquire))
		acquired = time.Now()
		c.Modelled = append(c.Modelled, ModelledAcquire)
	}
	a := acquired.Sub(detected)
	c.Acquire = &a
	return acquired
}

func sleepUntil(ctx context.Context, t time.Time) {
	d := time.Until(t)
	if d <= 0 {
		return
	}
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-tm.C:
	case <-ctx.Done():
	}
}
