package storage_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"go/build"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"

	"github.com/rewind-engine/rewind/dataflow/storage"
	"github.com/rewind-engine/rewind/dataflow/storage/storagetest"
)

// The S3 tests run against $REWIND_S3_ENDPOINT when set, else against a
// versitygw this test binary starts on loopback, else they skip, unless
// $REWIND_REQUIRE_S3=1, which turns the skip into a failure so CI cannot
// pass without exercising S3.
const (
	requireS3Env = "REWIND_REQUIRE_S3"
	testBucket   = "rewind-test"
	vgwAccess    = "rewindtest"
	vgwSecret    = "rewindtest-secret-key"
)

type s3Env struct {
	endpoint, access, secret string
}

func (e s3Env) options() storage.Options {
	return storage.Options{Endpoint: e.endpoint, AccessKeyID: e.access, SecretAccessKey: e.secret}
}

var s3srv struct {
	once sync.Once
	env  s3Env
	skip string // why S3 tests cannot run
	err  error  // the server could not be started

	cmd    *exec.Cmd
	exited chan struct{}
	dir    string
}

// s3TestEnv returns the S3 service to test against, starting versitygw
// on first use.
func s3TestEnv(t testing.TB) s3Env {
	t.Helper()
	s3srv.once.Do(startS3Server)
	if s3srv.err != nil {
		t.Fatalf("S3 test server: %v", s3srv.err)
	}
	if s3srv.skip != "" {
		if os.Getenv(requireS3Env) == "1" {
			t.Fatalf("%s=1 but no S3 service is available: %s", requireS3Env, s3srv.skip)
		}
		t.Skip(s3srv.skip)
	}
	return s3srv.env
}

func findVersitygw() string {
	if p, err := exec.LookPath("versitygw"); err == nil {
		return p
	}
	var gopaths []string
	if gp := build.Default.GOPATH; gp != "" {
		gopaths = append(gopaths, filepath.SplitList(gp)...)
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		gopaths = append(gopaths, filepath.SplitList(strings.TrimSpace(string(out)))...)
	}
	for _, gp := range gopaths {
		p := filepath.Join(gp, "bin", "versitygw")
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() {
			return p
		}
	}
	return ""
}

func startS3Server() {
	if ep := os.Getenv(storage.EnvS3Endpoint); ep != "" {
		s3srv.env = s3Env{endpoint: ep, access: os.Getenv(storage.EnvAccessKey), secret: os.Getenv(storage.EnvSecretKey)}
		return
	}
	bin := findVersitygw()
	if bin == "" {
		s3srv.skip = "no S3 service: set " + storage.EnvS3Endpoint + " or install versitygw (scripts/s3-server.sh install)"
		return
	}
	dir, err := os.MkdirTemp("", "rewind-storage-vgw-")
	if err != nil {
		s3srv.err = err
		return
	}
	s3srv.dir = dir
	root := filepath.Join(dir, "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		s3srv.err = err
		return
	}
	// The free port can be taken between our probe and versitygw's bind,
	// so try a few.
	for attempt := 0; attempt < 3; attempt++ {
		port, err := freePort()
		if err != nil {
			s3srv.err = err
			return
		}
		addr := "127.0.0.1:" + port
		logf, err := os.Create(filepath.Join(dir, fmt.Sprintf("versitygw-%d.log", attempt)))
		if err != nil {
			s3srv.err = err
			return
		}
		cmd := exec.Command(bin, "--port", addr, "--quiet", "posix", root)
		cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY="+vgwAccess, "ROOT_SECRET_KEY="+vgwSecret)
		cmd.Stdout, cmd.Stderr = logf, logf
		setPdeathsig(cmd)
		if err := cmd.Start(); err != nil {
			_ = logf.Close()
			s3srv.err = fmt.Errorf("starting %s: %w", bin, err)
			return
		}
		_ = logf.Close() // the child holds its own descriptor
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		if waitListening(addr, exited, 15*time.Second) {
			s3srv.cmd, s3srv.exited = cmd, exited
			s3srv.env = s3Env{endpoint: "http://" + addr, access: vgwAccess, secret: vgwSecret}
			return
		}
		_ = cmd.Process.Kill()
		<-exited
	}
	log, _ := os.ReadFile(filepath.Join(dir, "versitygw-2.log"))
	s3srv.err = fmt.Errorf("versitygw (%s) did not start listening; last log:\n%s", bin, log)
}

// waitListening polls addr until an HTTP request gets any answer.
func waitListening(addr string, exited <-chan struct{}, limit time.Duration) bool {
	client := &http.Client{Timeout: time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return false
		default:
		}
		if resp, err := client.Get("http://" + addr + "/"); err == nil {
			_ = resp.Body.Close()
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port, nil
}

// stopS3Server stops the versitygw this binary started, if any.
func stopS3Server() {
	if s3srv.cmd != nil {
		_ = s3srv.cmd.Process.Signal(os.Interrupt)
		select {
		case <-s3srv.exited:
		case <-time.After(3 * time.Second):
			_ = s3srv.cmd.Process.Kill()
			<-s3srv.exited
		}
	}
	if s3srv.dir != "" {
		_ = os.RemoveAll(s3srv.dir)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// testPrefix is a per-test key prefix, so tests sharing a bucket (and an
// external endpoint reused across runs) never see each other's objects.
func testPrefix(t testing.TB) string {
	name := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, t.Name())
	return name + "-" + randomHex(4)
}

// openS3Test opens an empty store under a fresh prefix and removes its
// objects at the end of the test.
func openS3Test(t testing.TB, opts ...func(*storage.Options)) storage.Store {
	t.Helper()
	env := s3TestEnv(t)
	o := env.options()
	for _, f := range opts {
		f(&o)
	}
	url := "s3://" + testBucket + "/" + testPrefix(t)
	st, err := storage.Open(testCtx(t), url, o)
	if err != nil {
		t.Fatalf("Open(%s): %v", url, err)
	}
	t.Cleanup(func() { cleanupS3(t, url, env) })
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func cleanupS3(t testing.TB, url string, env s3Env) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	st, err := storage.Open(ctx, url, env.options())
	if err != nil {
		t.Logf("cleanup: %v", err)
		return
	}
	defer st.Close()
	objs, err := st.List(ctx, "")
	if err != nil {
		t.Logf("cleanup: %v", err)
		return
	}
	for _, o := range objs {
		if err := st.Delete(ctx, o.Name); err != nil {
			t.Logf("cleanup: %v", err)
		}
	}
}

func TestS3Conformance(t *testing.T) {
	s3TestEnv(t) // skip (or fail) once, not per subtest
	storagetest.Run(t, func(t *testing.T) storage.Store { return openS3Test(t) })
}

// TestS3Unreachable: nothing listens on the port. Open must fail fast with
// storage.ErrUnreachable and name the endpoint.
func TestS3Unreachable(t *testing.T) {
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "http://127.0.0.1:" + port
	ctx := testCtx(t)
	st, err := storage.Open(ctx, "s3://bucket/prefix", storage.Options{Endpoint: endpoint, AccessKeyID: "k", SecretAccessKey: "s"})
	if err == nil {
		_ = st.Close()
		t.Fatal("Open of an unreachable endpoint succeeded")
	}
	if !errors.Is(err, storage.ErrUnreachable) {
		t.Fatalf("error %v does not wrap storage.ErrUnreachable", err)
	}
	if !strings.Contains(err.Error(), endpoint) || !strings.Contains(err.Error(), "s3://bucket/prefix") {
		t.Errorf("error %q does not name the endpoint and the store", err)
	}
	// How fast it gives up is a benchmark question; here it only must give
	// up by itself rather than wait for the test's own deadline.
	if ctx.Err() != nil {
		t.Fatalf("Open waited for the caller's deadline instead of giving up: %v", err)
	}
}

// TestS3NotSpeakingHTTP: something accepts connections but never answers
// like S3: it hangs up at once, or holds the connection silently. Open must
// still give ErrUnreachable within about Options.Timeout instead of
// retrying for minutes.
func TestS3NotSpeakingHTTP(t *testing.T) {
	for _, silent := range []bool{false, true} {
		t.Run(map[bool]string{false: "hangs-up", true: "silent"}[silent], func(t *testing.T) {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			var (
				wg    sync.WaitGroup
				mu    sync.Mutex
				conns []net.Conn
			)
			wg.Go(func() {
				for {
					c, err := l.Accept()
					if err != nil {
						return
					}
					if !silent {
						_ = c.Close()
						continue
					}
					mu.Lock()
					conns = append(conns, c)
					mu.Unlock()
				}
			})
			defer func() {
				_ = l.Close()
				wg.Wait()
				for _, c := range conns {
					_ = c.Close()
				}
			}()

			const timeout = 1500 * time.Millisecond
			ctx := testCtx(t)
			st, err := storage.Open(ctx, "s3://bucket", storage.Options{Endpoint: "http://" + l.Addr().String(), Timeout: timeout})
			if err == nil {
				_ = st.Close()
				t.Fatal("Open against a server that does not speak S3 succeeded")
			}
			if !errors.Is(err, storage.ErrUnreachable) {
				t.Fatalf("error %v does not wrap ErrUnreachable", err)
			}
			if ctx.Err() != nil {
				t.Fatalf("Open waited for the caller's deadline instead of its own %v timeout: %v", timeout, err)
			}
		})
	}
}

func TestS3OpenErrors(t *testing.T) {
	t.Setenv(storage.EnvS3Endpoint, "")
	ctx := testCtx(t)
	_, err := storage.Open(ctx, "s3://bucket/p", storage.Options{})
	if err == nil || !strings.Contains(err.Error(), storage.EnvS3Endpoint) {
		t.Errorf("Open without endpoint: %v; want an error naming %s", err, storage.EnvS3Endpoint)
	}
	for _, ep := range []string{"example.com:9000", "ftp://127.0.0.1:9000", "http://", "http://127.0.0.1:9000/path", "127.0.0.1", "127.0.0.1:port"} {
		_, err := storage.Open(ctx, "s3://bucket/p", storage.Options{Endpoint: ep})
		if err == nil || !strings.Contains(err.Error(), "bad S3 endpoint") {
			t.Errorf("Open with endpoint %q: %v; want a bad-endpoint error", ep, err)
		}
	}
}

func TestS3EndpointFromEnv(t *testing.T) {
	env := s3TestEnv(t)
	t.Setenv(storage.EnvS3Endpoint, env.endpoint)
	t.Setenv(storage.EnvAccessKey, env.access)
	t.Setenv(storage.EnvSecretKey, env.secret)
	url := "s3://" + testBucket + "/" + testPrefix(t)
	st, err := storage.Open(testCtx(t), url, storage.Options{})
	if err != nil {
		t.Fatalf("Open(%s) with endpoint and credentials from the environment: %v", url, err)
	}
	defer st.Close()
	if _, err := st.List(testCtx(t), ""); err != nil {
		t.Fatal(err)
	}
}

func TestS3BadCredentials(t *testing.T) {
	env := s3TestEnv(t)
	o := env.options()
	o.SecretAccessKey = "wrong-" + o.SecretAccessKey
	st, err := storage.Open(testCtx(t), "s3://"+testBucket+"/x", o)
	if err == nil {
		_ = st.Close()
		t.Fatal("Open with a wrong secret key succeeded")
	}
	if errors.Is(err, storage.ErrUnreachable) {
		t.Fatalf("a refused signature is not unreachability: %v", err)
	}
	if !strings.Contains(err.Error(), testBucket) {
		t.Errorf("error %q does not name the bucket", err)
	}
}

func TestS3CreatesBucket(t *testing.T) {
	env := s3TestEnv(t)
	bucket := "rewind-new-" + randomHex(4)
	st, err := storage.Open(testCtx(t), "s3://"+bucket, env.options())
	if err != nil {
		t.Fatalf("Open of a missing bucket: %v", err)
	}
	s := st
	defer func() {
		_ = s.Delete(context.Background(), "obj")
		_ = storage.S3Client(s).RemoveBucket(context.Background(), bucket)
		_ = s.Close()
	}()
	ok, err := storage.S3Client(s).BucketExists(testCtx(t), bucket)
	if err != nil || !ok {
		t.Fatalf("bucket %s after Open: exists=%v err=%v", bucket, ok, err)
	}
	if err := s.Put(testCtx(t), "obj", []byte("x")); err != nil {
		t.Fatal(err)
	}
	// Opening again finds the existing bucket.
	st2, err := storage.Open(testCtx(t), "s3://"+bucket, env.options())
	if err != nil {
		t.Fatalf("second Open: %v", err)
	}
	defer st2.Close()
	if got, err := st2.Get(testCtx(t), "obj"); err != nil || string(got) != "x" {
		t.Fatalf("Get through second store = %q, %v", got, err)
	}
}

func TestS3KeyLayoutAndIsolation(t *testing.T) {
	s := openS3Test(t)
	ctx := testCtx(t)
	payload := []byte("layout")
	if err := s.Put(ctx, "a/b", payload); err != nil {
		t.Fatal(err)
	}
	key := storage.S3Key(s, "a/b")
	info, err := storage.S3Client(s).StatObject(ctx, testBucket, key, minio.StatObjectOptions{})
	if err != nil {
		t.Fatalf("stat %s: %v", key, err)
	}
	if info.Size != int64(len(payload))+storage.TrailerSize {
		t.Fatalf("stored object has %d bytes, want %d", info.Size, len(payload)+storage.TrailerSize)
	}
	other := openS3Test(t)
	if objs, err := other.List(ctx, ""); err != nil || len(objs) != 0 {
		t.Fatalf("a store under another prefix lists %v, %v; want nothing", objs, err)
	}
}

// countingTransport records the requests a store sends.
type countingTransport struct {
	next http.RoundTripper
	mu   sync.Mutex
	reqs []string
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.reqs = append(c.reqs, r.Method+" "+r.URL.Path+"?"+r.URL.RawQuery)
	c.mu.Unlock()
	return c.next.RoundTrip(r)
}

// TestS3PutIsOneRequest: a payload above minio-go's 16 MiB multipart
// threshold still goes out as a single PUT, the atomic publish.
func TestS3PutIsOneRequest(t *testing.T) {
	ct := &countingTransport{}
	s := openS3Test(t, func(o *storage.Options) {
		storage.WrapTransport(o, func(rt http.RoundTripper) http.RoundTripper { ct.next = rt; return ct })
	})
	payload := storagetest.Payload(5, 20<<20)
	ct.mu.Lock()
	ct.reqs = nil
	ct.mu.Unlock()
	if err := s.Put(testCtx(t), "big", payload); err != nil {
		t.Fatal(err)
	}
	ct.mu.Lock()
	reqs := ct.reqs
	ct.mu.Unlock()
	if len(reqs) != 1 || !strings.HasPrefix(reqs[0], "PUT ") || strings.Contains(reqs[0], "upload") {
		t.Fatalf("Put of 20 MiB sent %q, want exactly one plain PUT", reqs)
	}
	got, err := s.Get(testCtx(t), "big")
	if err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("Get(big): %d bytes, %v", len(got), err)
	}
}

// failingTransport fails every request with a network error once down is
// set, as if the service had gone away after Open.
type failingTransport struct {
	next http.RoundTripper
	down atomic.Bool
}

func (f *failingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if f.down.Load() {
		return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused (simulated)")}
	}
	return f.next.RoundTrip(r)
}

// TestS3UnreachableAfterOpen: a service that disappears later turns every
// operation into ErrUnreachable within seconds, naming object and endpoint.
func TestS3UnreachableAfterOpen(t *testing.T) {
	ft := &failingTransport{}
	s := openS3Test(t, func(o *storage.Options) {
		storage.WrapTransport(o, func(rt http.RoundTripper) http.RoundTripper { ft.next = rt; return ft })
	})
	ctx := testCtx(t)
	if err := s.Put(ctx, "obj", []byte("x")); err != nil {
		t.Fatal(err)
	}
	ft.down.Store(true)
	defer ft.down.Store(false) // let the cleanup delete the object
	_, err := s.Get(ctx, "obj")
	if !errors.Is(err, storage.ErrUnreachable) || !strings.Contains(err.Error(), `"obj"`) {
		t.Fatalf("Get with the service gone: %v; want ErrUnreachable naming the object", err)
	}
	if err := s.Put(ctx, "obj", []byte("y")); !errors.Is(err, storage.ErrUnreachable) {
		t.Fatalf("Put with the service gone: %v; want ErrUnreachable", err)
	}
}

// TestS3BucketRoot: a store without a prefix owns the whole bucket.
func TestS3BucketRoot(t *testing.T) {
	env := s3TestEnv(t)
	bucket := "rewind-root-" + randomHex(4)
	st, err := storage.Open(testCtx(t), "s3://"+bucket, env.options())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = st.Delete(context.Background(), "a/b")
		_ = st.Delete(context.Background(), "c")
		_ = storage.S3Client(st).RemoveBucket(context.Background(), bucket)
		_ = st.Close()
	}()
	if st.URL() != "s3://"+bucket {
		t.Errorf("URL() = %q", st.URL())
	}
	ctx := testCtx(t)
	for _, n := range []string{"c", "a/b"} {
		if err := st.Put(ctx, n, []byte(n)); err != nil {
			t.Fatal(err)
		}
	}
	if storage.S3Key(st, "a/b") != "a/b" {
		t.Errorf("key of a/b at bucket root = %q", storage.S3Key(st, "a/b"))
	}
	objs, err := st.List(ctx, "")
	if err != nil || len(objs) != 2 || objs[0].Name != "a/b" || objs[1].Name != "c" {
		t.Fatalf("List at bucket root = %v, %v; want a/b, c and nothing else", objs, err)
	}
}

// TestS3ListCancelledIsAnError: minio-go ends a listing without an error
// when its context is cancelled; the store must not pass that off as a
// short (here: empty) listing, or a restore could find "no recovery point"
// in a run that has some.
func TestS3ListCancelledIsAnError(t *testing.T) {
	st := openS3Test(t)
	ctx := testCtx(t)
	if err := st.Put(ctx, "chk/1/x", []byte("x")); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	objs, err := st.List(cctx, "chk/")
	if err == nil {
		t.Fatalf("a listing with a cancelled context returned %d objects and no error", len(objs))
	}
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("a cancelled listing: %v, want it to wrap context.Canceled", err)
	}
}
