package storage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// OutageCalls is how many call timeouts of silence a run waits out before
// it gives up on storage: DefaultOutageLimit with the default CallTimeout.
const OutageCalls = 6

// DefaultOutageLimit is how long a run waits for storage that stopped
// answering before it fails, with the default CallTimeout.
const DefaultOutageLimit = OutageCalls * DefaultCallTimeout

// OutageLimit is the wait limit that goes with a call timeout (0 = the
// default one): OutageCalls times it.
func OutageLimit(callTimeout time.Duration) time.Duration {
	if callTimeout <= 0 {
		callTimeout = DefaultCallTimeout
	}
	return OutageCalls * callTimeout
}

// Patient is one run's view of storage that may stop answering for a
// while. It keeps one clock for the whole run: the outage starts with the
// first call that fails with ErrUnreachable and ends with the next call that
// succeeds. Its Store retries such calls until the outage is older than
// the limit; its Once view makes single attempts, for callers that have
// their own retry (a failed recovery point is followed by the next one).
// Either way the start and the end of an outage are logged once.
type Patient struct {
	st    Store
	limit time.Duration
	log   *slog.Logger

	mu      sync.Mutex
	since   time.Time // start of the outage; zero when storage answers
	last    error     // the latest failure of the outage
	retries int
}

// NewPatient wraps st; a nil log discards the messages.
func NewPatient(st Store, limit time.Duration, log *slog.Logger) *Patient {
	if limit <= 0 {
		limit = DefaultOutageLimit
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Patient{st: st, limit: limit, log: log}
}

// Store retries every call failing with ErrUnreachable until the outage
// is older than the limit. Every call is safe to repeat: a Put writes the
// same bytes again, Get and List read, Delete of a missing object is no
// error.
func (p *Patient) Store() Store { return retrying{p} }

// Once makes single attempts, recording their outcome on the clock.
func (p *Patient) Once() Store { return once{p} }

// Err is the error that ends the run once storage has not answered for
// longer than the limit, else nil.
func (p *Patient) Err() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.since.IsZero() || time.Since(p.since) <= p.limit {
		return nil
	}
	return p.outageErr(p.last)
}

// Outage is how long storage has not answered, or 0 while it does.
func (p *Patient) Outage() time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.since.IsZero() {
		return 0
	}
	return time.Since(p.since)
}

// outageErr words the end of the wait; p.mu is held.
func (p *Patient) outageErr(last error) error {
	msg := fmt.Sprintf("storage %s has not answered for %v (the limit is %v)", p.st.URL(),
		time.Since(p.since).Round(100*time.Millisecond), p.limit)
	if last == nil {
		return fmt.Errorf("%s: %w", msg, ErrUnreachable)
	}
	return fmt.Errorf("%s; last error: %w", msg, last)
}

// record notes the outcome of a call that started at start; for a failure
// while storage is unreachable it returns how long the outage has lasted.
func (p *Patient) record(start time.Time, err error) (outage time.Duration, down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if err == nil || !errors.Is(err, ErrUnreachable) {
		// A missing or corrupt object is an answer too.
		answered := err == nil || errors.Is(err, ErrNotFound) || errors.Is(err, ErrCorrupt)
		if answered && !p.since.IsZero() {
			p.log.Warn("storage answers again", "storage", p.st.URL(),
				"after", time.Since(p.since).Round(time.Millisecond), "retries", p.retries)
			p.since, p.last, p.retries = time.Time{}, nil, 0
		}
		return 0, false
	}
	p.last = err
	if p.since.IsZero() {
		p.since = start
		p.log.Warn("storage is not answering; waiting for it", "storage", p.st.URL(),
			"limit", p.limit, "err", err)
	}
	return time.Since(p.since), true
}

// do runs call until it succeeds, fails with anything but ErrUnreachable,
// or the outage is older than the limit.
func (p *Patient) do(ctx context.Context, call func() error) error {
	backoff := 100 * time.Millisecond
	for {
		start := time.Now()
		err := call()
		outage, down := p.record(start, err)
		if !down {
			return err
		}
		if outage > p.limit {
			p.mu.Lock()
			defer p.mu.Unlock()
			return p.outageErr(err)
		}
		// A stalled call already waited a call timeout; a refused one
		// returns at once, so back off before asking again.
		wait := min(backoff, p.limit-outage)
		backoff = min(2*backoff, 2*time.Second)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		p.mu.Lock()
		p.retries++
		p.mu.Unlock()
	}
}

type retrying struct{ p *Patient }

func (r retrying) Put(ctx context.Context, name string, data []byte) error {
	return r.p.do(ctx, func() error { return r.p.st.Put(ctx, name, data) })
}

func (r retrying) Get(ctx context.Context, name string) (data []byte, err error) {
	err = r.p.do(ctx, func() error {
		data, err = r.p.st.Get(ctx, name)
		return err
	})
	return data, err
}

func (r retrying) List(ctx context.Context, prefix string) (objs []Object, err error) {
	err = r.p.do(ctx, func() error {
		objs, err = r.p.st.List(ctx, prefix)
		return err
	})
	return objs, err
}

func (r retrying) Delete(ctx context.Context, name string) error {
	return r.p.do(ctx, func() error { return r.p.st.Delete(ctx, name) })
}

func (r retrying) URL() string  { return r.p.st.URL() }
func (r retrying) Close() error { return r.p.st.Close() }

type once struct{ p *Patient }

func (o once) Put(ctx context.Context, name string, data []byte) error {
	start := time.Now()
	err := o.p.st.Put(ctx, name, data)
	o.p.record(start, err)
	return err
}

func (o once) Get(ctx context.Context, name string) ([]byte, error) {
	start := time.Now()
	data, err := o.p.st.Get(ctx, name)
	o.p.record(start, err)
	return data, err
}

func (o once) List(ctx context.Context, prefix string) ([]Object, error) {
	start := time.Now()
	objs, err := o.p.st.List(ctx, prefix)
	o.p.record(start, err)
	return objs, err
}

func (o once) Delete(ctx context.Context, name string) error {
	start := time.Now()
	err := o.p.st.Delete(ctx, name)
	o.p.record(start, err)
	return err
}

func (o once) URL() string  { return o.p.st.URL() }
func (o once) Close() error { return o.p.st.Close() }
