package storage_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/rewind-engine/rewind/dataflow/runtest"
	"github.com/rewind-engine/rewind/dataflow/storage"
)

// TestS3UploadSlowerThanTheAllowance: a link at half the rate the answer
// allowance assumes (one second per MiB). The whole body fits in the
// socket buffers, so it is handed over at once and the bytes drain for
// twice the allowance afterwards: the allowance alone cuts the upload off
// every time (by about 0.9 s here; load only widens it). On Linux the
// watchdog sees the send queue shrink and counts that as progress, so the
// upload succeeds however slow the link, while a frozen server (a queue
// that no longer moves) still fails within the deadline plus allowance.
func TestS3UploadSlowerThanTheAllowance(t *testing.T) {
	env := s3TestEnv(t)
	ctx := testCtx(t)
	const callTimeout = 300 * time.Millisecond
	const size, rate = 1 << 20, 1 << 19 // 2 s on the wire, 1.3 s allowed after handover
	p := runtest.StartSlowProxy(t, env.endpoint, 0, rate)
	opts := env.options()
	opts.Endpoint, opts.CallTimeout = p.Endpoint, callTimeout
	st, err := storage.Open(ctx, "s3://"+testBucket+"/slower-"+randomHex(4), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	data := bytes.Repeat([]byte("0123456789abcdef"), size/16)
	start := time.Now()
	if err := st.Put(ctx, "big", data); err != nil {
		t.Fatalf("a %d-byte upload at %d B/s failed: %v", size, rate, err)
	}
	took := time.Since(start)
	// The condition under test: the upload outlasted what the allowance
	// grants after handover (the handover itself is near instant).
	if allowed := callTimeout + time.Duration(size)*time.Second/(1<<20); took < allowed+300*time.Millisecond {
		t.Fatalf("the upload took %v, not clearly beyond the %v the allowance grants: the link was not slow enough to test", took, allowed)
	}
	got, err := st.Get(ctx, "big")
	if err != nil {
		t.Fatalf("downloading it back: %v", err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("downloaded object differs")
	}
	t.Logf("upload of %d bytes at %d B/s took %v", size, rate, took.Round(time.Millisecond))
}

// TestS3FrozenServerMidDrainFails: the other side of the send-queue rule.
// A server frozen while an upload's bytes drain over a slow link stops
// taking them; the queue stops shrinking and the call fails with
// ErrUnreachable long before the server is continued (15 s later), when
// the upload would otherwise have gone through.
func TestS3FrozenServerMidDrainFails(t *testing.T) {
	srv := runtest.StartPrivateS3(t)
	ctx := testCtx(t)
	const callTimeout = 300 * time.Millisecond
	const size, rate = 1 << 20, 1 << 19
	p := runtest.StartSlowProxy(t, srv.Endpoint, 0, rate)
	opts := srv.Options(callTimeout)
	opts.Endpoint = p.Endpoint
	st, err := storage.Open(ctx, srv.URL(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// The body is handed over at once; half a second later the bytes are
	// still draining when the server stops.
	thaw := time.AfterFunc(500*time.Millisecond, func() { srv.Freeze(15 * time.Second) })
	defer thaw.Stop()
	defer srv.Thaw()
	start := time.Now()
	err = st.Put(ctx, "big", bytes.Repeat([]byte("0123456789abcdef"), size/16))
	took := time.Since(start)
	if !srv.Frozen() {
		t.Fatalf("the upload ended (%v) after %v, before the server was frozen mid-drain", err, took)
	}
	if !errors.Is(err, storage.ErrUnreachable) {
		t.Fatalf("upload to a server frozen mid-drain: %v after %v; want ErrUnreachable", err, took)
	}
	t.Logf("failed after %v: %v", took.Round(time.Millisecond), err)
}
