package storage_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rewind-engine/rewind/dataflow/runtest"
	"github.com/rewind-engine/rewind/dataflow/storage"
	"github.com/rewind-engine/rewind/dataflow/storage/storagetest"
)

// A writer killed mid-write must leave nothing visible: the test re-runs
// this binary as a child that starts a Put of a large object through a
// stalled write path, SIGKILLs it once bytes are on their way, and checks
// what readers see.

const (
	childURLEnv  = "REWIND_STORAGE_TEST_URL"
	childNameEnv = "REWIND_STORAGE_TEST_NAME"

	crashPayload = 8 << 20 // bytes the child tries to write
	crashSentAt  = 1 << 20 // bytes written before it reports "writing"
	crashChunk   = 64 << 10
	writingLine  = "WRITING"
)

// runChild is the child side, selected by childModeEnv in TestMain. It
// returns an exit code.
func runChild(mode string) int {
	switch mode {
	case "exit":
		return 0
	case "crash-local", "crash-s3":
	default:
		fmt.Fprintf(os.Stderr, "unknown %s=%q\n", childModeEnv, mode)
		return 2
	}
	ctx := context.Background()
	url, name := os.Getenv(childURLEnv), os.Getenv(childNameEnv)
	st, err := storage.Open(ctx, url, storage.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	payload := storagetest.Payload(99, crashPayload)
	switch mode {
	case "crash-local":
		// The slow path: write in chunks, announce once part of the
		// object is in the temporary file, then stall until killed.
		storage.SetWriteHook(st, func(f *os.File, p []byte) error {
			for off := 0; off < len(p); off += crashChunk {
				if _, err := f.Write(p[off:min(off+crashChunk, len(p))]); err != nil {
					return err
				}
				if off+crashChunk == crashSentAt {
					fmt.Println(writingLine)
				}
				if off+crashChunk >= crashSentAt {
					time.Sleep(time.Hour)
				}
			}
			return nil
		})
		err = st.Put(ctx, name, payload)
	case "crash-s3":
		// The same bytes Put would send, from a reader that stalls after
		// crashSentAt bytes have gone to the HTTP request body.
		err = storage.PutThrough(ctx, st, name, payload, func(r io.Reader) io.Reader {
			return &stallingReader{r: r, after: crashSentAt}
		})
	}
	// Reaching here means the parent did not kill us in time.
	fmt.Fprintf(os.Stderr, "child finished the write (err=%v) instead of being killed\n", err)
	return 3
}

// stallingReader hands out data in small slow chunks, reports once after
// bytes have been read, and then blocks forever: the slowest writer.
type stallingReader struct {
	r         io.Reader
	after, n  int
	announced bool
}

func (s *stallingReader) Read(p []byte) (int, error) {
	if s.n >= s.after {
		if !s.announced {
			s.announced = true
			fmt.Println(writingLine)
		}
		time.Sleep(time.Hour)
	}
	time.Sleep(time.Millisecond)
	n, err := s.r.Read(p[:min(len(p), crashChunk, s.after-s.n)])
	s.n += n
	return n, err
}

// killMidWrite runs the child writing name into url, waits until it says
// bytes are on their way and, if arrived is set, until arrived reports them
// where the store keeps them, SIGKILLs it and checks it died of the signal.
func killMidWrite(t *testing.T, mode, url, name string, arrived func() bool, extraEnv ...string) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childModeEnv+"="+mode, childURLEnv+"="+url, childNameEnv+"="+name)
	cmd.Env = append(cmd.Env, extraEnv...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting child: %v", err)
	}
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	timeout := time.After(30 * time.Second)
	started := false
	for !started {
		select {
		case l, ok := <-lines:
			if !ok {
				_ = cmd.Wait()
				t.Fatalf("child exited before writing: %v\n%s", cmd.ProcessState, stderr.String())
			}
			started = l == writingLine
		case <-timeout:
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("child never reported writing\n%s", stderr.String())
		}
	}
	for deadline := time.Now().Add(30 * time.Second); arrived != nil && !arrived(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("the bytes the child sent never arrived\n%s", stderr.String())
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("SIGKILL child: %v", err)
	}
	for range lines { // drain so the reader goroutine ends
	}
	_ = cmd.Wait()
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child was not killed mid-write: %v\n%s", cmd.ProcessState, stderr.String())
	}
}

// checkAfterCrash asserts what readers see after the killed write: with
// prev nil, name is neither listed nor readable; otherwise name still holds
// exactly prev, the last complete version.
func checkAfterCrash(t *testing.T, st storage.Store, name string, prev []byte) {
	t.Helper()
	ctx := testCtx(t)
	objs, err := st.List(ctx, path.Dir(name)+"/")
	if err != nil {
		t.Fatal(err)
	}
	got, err := st.Get(ctx, name)
	if prev == nil {
		if len(objs) != 0 {
			t.Fatalf("after a killed write List shows %v, want nothing", objs)
		}
		if !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("after a killed write Get(%q) = %d bytes, %v; want storage.ErrNotFound", name, len(got), err)
		}
		return
	}
	if len(objs) != 1 || objs[0].Name != name || objs[0].Size != int64(len(prev)) {
		t.Fatalf("after a killed overwrite List shows %v, want only the previous %q (%d bytes)", objs, name, len(prev))
	}
	if err != nil || !bytes.Equal(got, prev) {
		t.Fatalf("after a killed overwrite Get(%q) = %d bytes, %v; want the previous %d bytes", name, len(got), err, len(prev))
	}
}

func TestKilledWriterLeavesNothingLocal(t *testing.T) {
	for _, overwrite := range []bool{false, true} {
		t.Run(map[bool]string{false: "new", true: "overwrite"}[overwrite], func(t *testing.T) {
			root := t.TempDir()
			st := openLocalTest(t, root)
			name := "chk/9/op-1/kg-3"
			var prev []byte
			if overwrite {
				prev = []byte("the previous complete version")
				if err := st.Put(testCtx(t), name, prev); err != nil {
					t.Fatal(err)
				}
			}
			// The child's writes are synchronous: the bytes are in the
			// temporary file before it says so (checked below).
			killMidWrite(t, "crash-local", st.URL(), name, nil)
			checkAfterCrash(t, st, name, prev)

			left := tmpFiles(t, root)
			if len(left) != 1 || !strings.HasPrefix(left[0], "chk/9/op-1/"+storage.TmpPrefix) {
				t.Fatalf("temporary files after the kill: %q; want the one the child was writing", left)
			}
			fi, err := os.Stat(filepath.Join(root, filepath.FromSlash(left[0])))
			if err != nil || fi.Size() < crashSentAt {
				t.Fatalf("leftover %s: %v, size %d; want at least %d bytes written before the kill", left[0], err, fi.Size(), crashSentAt)
			}

			// A new store (a restarted worker) sweeps the leftover.
			st2 := openLocalTest(t, root)
			if left := tmpFiles(t, root); len(left) != 0 {
				t.Fatalf("reopening the store left temporary files %q", left)
			}
			checkAfterCrash(t, st2, name, prev)
		})
	}
}

func TestKilledWriterLeavesNothingS3(t *testing.T) {
	env := s3TestEnv(t)
	for _, overwrite := range []bool{false, true} {
		t.Run(map[bool]string{false: "new", true: "overwrite"}[overwrite], func(t *testing.T) {
			st := openS3Test(t)
			name := "chk/9/op-1/kg-3"
			var prev []byte
			if overwrite {
				prev = []byte("the previous complete version")
				if err := st.Put(testCtx(t), name, prev); err != nil {
					t.Fatal(err)
				}
			}
			// The child talks to the server through a proxy that counts
			// what reached the server: the kill comes once half of what
			// the child handed to its connection has, so the server is
			// mid-request.
			proxy := runtest.StartSlowProxy(t, env.endpoint, 0, 0)
			killMidWrite(t, "crash-s3", st.URL(), name, func() bool { return proxy.Sent() >= crashSentAt/2 },
				storage.EnvS3Endpoint+"="+proxy.Endpoint, storage.EnvAccessKey+"="+env.access, storage.EnvSecretKey+"="+env.secret)
			checkAfterCrash(t, st, name, prev)
			// The server notices the dropped connection asynchronously;
			// look again once it has closed every connection of the
			// child, so it is done with the request and had its chance
			// to (wrongly) publish.
			proxy.WaitClosed(t, 30*time.Second)
			checkAfterCrash(t, st, name, prev)
		})
	}
}
