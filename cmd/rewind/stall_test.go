//go:build unix

package main

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rewind-engine/rewind/dataflow/runtest"
	"github.com/rewind-engine/rewind/dataflow/storage"
)

// TestFrozenStorageExitsOneWithOneLine: the S3 server freezes (SIGSTOP)
// once the first batch has committed and never continues. The run logs
// that storage is not answering, then ends by itself with exit 1 and one
// line naming the store and how long it waited, soon after the limit
// (6 x --storage-timeout). Before the deadlines it hung until the server
// was continued.
func TestFrozenStorageExitsOneWithOneLine(t *testing.T) {
	srv := runtest.StartPrivateS3(t)
	t.Setenv(storage.EnvAccessKey, srv.AccessKey)
	t.Setenv(storage.EnvSecretKey, srv.SecretKey)
	url := srv.URL(t)
	const timeout = 300 * time.Millisecond
	args := []string{"run", "--executor", "microbatch", "--input", "gen:records=0,rate=5000", "--output", filepath.Join(t.TempDir(), "o"),
		"--storage", url, "--s3-endpoint", srv.Endpoint, "--storage-timeout", timeout.String(), "--trigger", "20ms",
		"--progress", "json"}
	stderr := &freezeOn{mark: []byte(`"event":"batch"`), freeze: func() { srv.Freeze(0) }}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var stdout bytes.Buffer
	code := execute(ctx, args, &stdout, stderr)
	took := time.Since(stderr.at)
	if ctx.Err() != nil {
		t.Fatalf("the run was still going after a minute of frozen storage")
	}
	if stderr.at.IsZero() {
		t.Fatalf("no batch committed before the run ended (exit %d): %s", code, stderr.String())
	}
	if code != exitFailure {
		t.Fatalf("exit %d, want %d; stderr:\n%s", code, exitFailure, stderr.String())
	}
	last := lastLine(stderr.String())
	for _, want := range []string{"rewind: ", url, "has not answered for", "storage unreachable"} {
		if !strings.Contains(last, want) {
			t.Errorf("last line %q does not say %q", last, want)
		}
	}
	if !strings.Contains(stderr.String(), "storage is not answering") {
		t.Errorf("stderr never said storage is not answering:\n%s", stderr.String())
	}
	if limit := storage.OutageLimit(timeout); took > limit+5*time.Second {
		t.Errorf("the run ended %v after the freeze; the limit is %v", took, limit)
	}
}

// freezeOn is a stderr that calls freeze once mark has been written to it.
type freezeOn struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	mark   []byte
	freeze func()
	at     time.Time
}

func (f *freezeOn) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.buf.Write(p)
	if f.at.IsZero() && bytes.Contains(f.buf.Bytes(), f.mark) {
		f.at = time.Now()
		f.freeze()
	}
	return len(p), nil
}

func (f *freezeOn) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.buf.String()
}
