package storage_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rewind-engine/rewind/dataflow/storage"
)

// flakyStore fails every call with ErrUnreachable (after stall) until
// down is over, then passes calls on to a local store.
type flakyStore struct {
	storage.Store
	mu    sync.Mutex
	until time.Time
	calls int
	stall time.Duration
}

func (f *flakyStore) down() error {
	f.mu.Lock()
	f.calls++
	until := f.until
	f.mu.Unlock()
	if time.Now().Before(until) {
		time.Sleep(f.stall)
		return fmt.Errorf("storage: put in %s: did not answer for %v: %w", f.URL(), f.stall, storage.ErrUnreachable)
	}
	return nil
}

func (f *flakyStore) Put(ctx context.Context, name string, data []byte) error {
	if err := f.down(); err != nil {
		return err
	}
	return f.Store.Put(ctx, name, data)
}

func (f *flakyStore) Get(ctx context.Context, name string) ([]byte, error) {
	if err := f.down(); err != nil {
		return nil, err
	}
	return f.Store.Get(ctx, name)
}

// TestPatientWaitsOutAnOutage: the retrying store waits out an outage
// shorter than the limit, logging its start and end once; a longer one
// fails with ErrUnreachable naming the store soon after the limit; the
// single-attempt view does not retry but shares the clock (Err); a missing
// object is an answer that ends the outage; a cancelled caller stops
// waiting.
func TestPatientWaitsOutAnOutage(t *testing.T) {
	ctx := testCtx(t)
	var logs bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return logs.Write(p)
	}), nil))
	f := &flakyStore{Store: openLocalTest(t, t.TempDir()), stall: 50 * time.Millisecond}
	const limit = time.Second

	f.until = time.Now().Add(400 * time.Millisecond)
	p := storage.NewPatient(f, limit, log)
	if err := p.Store().Put(ctx, "a", []byte("x")); err != nil {
		t.Fatalf("an outage shorter than the limit: %v", err)
	}
	if f.calls < 3 {
		t.Fatalf("%d calls: the outage was not retried", f.calls)
	}
	mu.Lock()
	got := logs.String()
	mu.Unlock()
	if strings.Count(got, "storage is not answering") != 1 || strings.Count(got, "storage answers again") != 1 {
		t.Fatalf("want the start and the end of the outage logged once each:\n%s", got)
	}

	f.until = time.Now().Add(time.Hour)
	start := time.Now()
	err := p.Store().Put(ctx, "a", []byte("x"))
	took := time.Since(start)
	if !errors.Is(err, storage.ErrUnreachable) || !strings.Contains(err.Error(), f.URL()) || !strings.Contains(err.Error(), "has not answered for") {
		t.Fatalf("an outage longer than the limit: %v; want ErrUnreachable naming %s", err, f.URL())
	}
	if took < limit || took > limit+time.Second {
		t.Fatalf("gave up after %v; the limit is %v", took, limit)
	}
	if p.Err() == nil {
		t.Fatal("Err is nil after the limit passed")
	}

	q := storage.NewPatient(f, limit, nil)
	f.mu.Lock()
	f.calls = 0
	f.mu.Unlock()
	if err := q.Once().Put(ctx, "a", nil); !errors.Is(err, storage.ErrUnreachable) || f.calls != 1 {
		t.Fatalf("Once: %v after %d calls; want one failed attempt", err, f.calls)
	}
	if q.Outage() == 0 || q.Err() != nil {
		t.Fatalf("Once: outage %v, err %v; want an outage under the limit", q.Outage(), q.Err())
	}
	f.until = time.Time{}
	if _, err := q.Once().Get(ctx, "missing"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("get of a missing object: %v", err)
	}
	if q.Outage() != 0 {
		t.Fatal("a not-found answer did not end the outage")
	}

	f.until = time.Now().Add(time.Hour)
	cctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	start = time.Now()
	if err := storage.NewPatient(f, time.Hour, nil).Store().Put(cctx, "a", nil); err == nil {
		t.Fatal("a cancelled caller got success")
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("a cancelled caller waited %v", took)
	}
}

type writerFunc func([]byte) (int, error)

func (w writerFunc) Write(p []byte) (int, error) { return w(p) }
