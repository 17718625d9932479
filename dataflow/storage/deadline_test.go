//go:build unix

package storage_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rewind-engine/rewind/dataflow/runtest"
	"github.com/rewind-engine/rewind/dataflow/storage"
)

// TestS3FrozenServerCallsFail: a frozen server (SIGSTOP: its kernel still
// accepts connections, so requests hang instead of being refused) makes
// every call fail with ErrUnreachable within about CallTimeout, naming the
// store, the endpoint and how long it waited; once continued, the same
// store works again. Before the watchdog each call hung for as long as the
// server was frozen.
func TestS3FrozenServerCallsFail(t *testing.T) {
	srv := runtest.StartPrivateS3(t)
	const callTimeout = 400 * time.Millisecond
	ctx := testCtx(t)
	url := srv.URL(t)
	st, err := storage.Open(ctx, url, srv.Options(callTimeout))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Put(ctx, "a/x", []byte("payload")); err != nil {
		t.Fatal(err)
	}
	calls := map[string]func() error{
		"put":    func() error { return st.Put(ctx, "a/y", []byte("more")) },
		"get":    func() error { _, err := st.Get(ctx, "a/x"); return err },
		"list":   func() error { _, err := st.List(ctx, "a/"); return err },
		"delete": func() error { return st.Delete(ctx, "a/x") },
	}
	for _, op := range []string{"put", "get", "list", "delete"} {
		srv.Freeze(0)
		start := time.Now()
		err := calls[op]()
		took := time.Since(start)
		srv.Thaw()
		if err == nil {
			t.Fatalf("%s against a frozen server succeeded", op)
		}
		if !errors.Is(err, storage.ErrUnreachable) {
			t.Errorf("%s: %v does not wrap ErrUnreachable", op, err)
		}
		for _, want := range []string{url, srv.Endpoint, "did not answer for"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("%s: error %q does not say %q", op, err, want)
			}
		}
		// minio-go's own retries must not stretch the wait: the watchdog
		// bounds the call, not each attempt.
		if took > 5*callTimeout {
			t.Errorf("%s failed after %v; want about %v", op, took, callTimeout)
		}
		t.Logf("%s: failed after %v: %v", op, took.Round(time.Millisecond), err)
		if err := calls[op](); err != nil {
			t.Errorf("%s after the server was continued: %v", op, err)
		}
	}
}

// TestS3SlowButMovingCalls: injected latency below the deadline, and a
// large upload through a link slow enough that it takes many deadlines in
// all, succeed: the deadline is on no progress, not on the whole call.
// Latency above the deadline fails with ErrUnreachable.
func TestS3SlowButMovingCalls(t *testing.T) {
	env := s3TestEnv(t)
	ctx := testCtx(t)
	const callTimeout = 300 * time.Millisecond
	open := func(endpoint string, callTimeout time.Duration) storage.Store {
		opts := env.options()
		opts.Endpoint, opts.CallTimeout = endpoint, callTimeout
		st, err := storage.Open(ctx, "s3://"+testBucket+"/slow-"+randomHex(4), opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		return st
	}

	t.Run("latency-below-deadline", func(t *testing.T) {
		// A generous deadline: a loaded machine must not turn slow into
		// silent here.
		p := runtest.StartSlowProxy(t, env.endpoint, 100*time.Millisecond, 0)
		st := open(p.Endpoint, 20*100*time.Millisecond)
		for i := range 3 {
			if err := st.Put(ctx, "k", []byte{byte(i)}); err != nil {
				t.Fatal(err)
			}
			if _, err := st.Get(ctx, "k"); err != nil {
				t.Fatal(err)
			}
		}
	})
	t.Run("large-upload-slow-link", func(t *testing.T) {
		const size, rate = 3 << 19, 1 << 20 // 1.5 s on the wire each way, five deadlines
		p := runtest.StartSlowProxy(t, env.endpoint, 0, rate)
		st := open(p.Endpoint, callTimeout)
		data := bytes.Repeat([]byte("0123456789abcdef"), size/16)
		start := time.Now()
		if err := st.Put(ctx, "big", data); err != nil {
			t.Fatalf("a %d-byte upload at %d B/s failed: %v", size, rate, err)
		}
		got, err := st.Get(ctx, "big")
		if err != nil {
			t.Fatalf("downloading it back: %v", err)
		}
		if !bytes.Equal(got, data) {
			t.Fatal("downloaded object differs")
		}
		if took := time.Since(start); took < 4*callTimeout {
			t.Fatalf("upload and download took %v: the proxy did not slow them below the deadline", took)
		}
	})
	t.Run("latency-above-deadline", func(t *testing.T) {
		p := runtest.StartSlowProxy(t, env.endpoint, 0, 0)
		st := open(p.Endpoint, callTimeout)
		p.SetDelay(3 * callTimeout)
		err := st.Put(ctx, "k", []byte("x"))
		if !errors.Is(err, storage.ErrUnreachable) {
			t.Fatalf("put with %v latency per chunk: %v; want ErrUnreachable", 3*callTimeout, err)
		}
	})
}
