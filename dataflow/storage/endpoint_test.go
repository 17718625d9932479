package storage_test

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rewind-engine/rewind/dataflow/storage"
)

func TestParseEndpoint(t *testing.T) {
	for ep, want := range map[string]string{
		"http://127.0.0.1:9000":   "http://127.0.0.1:9000",
		"https://s3.example.com":  "https://s3.example.com",
		"http://10.0.0.1:9000/":   "http://10.0.0.1:9000",
		"127.0.0.1:9000":          "http://127.0.0.1:9000",
		"127.1.2.3:9000":          "http://127.1.2.3:9000",
		"localhost:9000":          "http://localhost:9000",
		"[::1]:9000":              "http://[::1]:9000",
		"https://127.0.0.1:10443": "https://127.0.0.1:10443",
	} {
		u, err := storage.ParseEndpoint(ep)
		if err != nil || u.String() != want {
			t.Errorf("ParseEndpoint(%q) = %v, %v; want %s", ep, u, err, want)
		}
	}
	for _, ep := range []string{"", "example.com:9000", "10.0.0.1:9000", "127.0.0.1", "127.0.0.1:", "127.0.0.1:port",
		"ftp://127.0.0.1:9000", "http://", "http://127.0.0.1:9000/path", "http://127.0.0.1:99999", "http://u:p@127.0.0.1:9000",
		"http://127.0.0.1:9000?x=1", "localhost"} {
		u, err := storage.ParseEndpoint(ep)
		if err == nil || !strings.Contains(err.Error(), "bad S3 endpoint") || !strings.Contains(err.Error(), "want http://host:port") {
			t.Errorf("ParseEndpoint(%q) = %v, %v; want a bad-endpoint error saying what is allowed", ep, u, err)
		}
	}
}

// A scheme-less loopback host:port reaches a real S3 server over HTTP.
func TestS3SchemelessLoopbackEndpointIsHTTP(t *testing.T) {
	env := s3TestEnv(t)
	opts := env.options()
	opts.Endpoint = strings.TrimPrefix(env.endpoint, "http://")
	if opts.Endpoint == env.endpoint {
		t.Fatalf("the test server's endpoint %s is not http://", env.endpoint)
	}
	st, err := storage.Open(testCtx(t), "s3://"+testBucket+"/"+testPrefix(t), opts)
	if err != nil {
		t.Fatalf("Open with endpoint %s: %v", opts.Endpoint, err)
	}
	defer st.Close()
	if err := st.Put(testCtx(t), "a", []byte("x")); err != nil {
		t.Fatal(err)
	}
}

// https:// against a server that speaks plain HTTP says so at once,
// instead of "did not answer within 3s".
func TestS3HTTPSAgainstPlainHTTPSaysSo(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusForbidden) }))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	start := time.Now()
	st, err := storage.Open(testCtx(t), "s3://bucket", storage.Options{Endpoint: "https://" + host, Timeout: 3 * time.Second})
	if err == nil {
		_ = st.Close()
		t.Fatal("Open over TLS against a plain HTTP server succeeded")
	}
	want := "the server at " + host + " speaks plain HTTP, not TLS; use http://" + host
	if !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "did not answer") {
		t.Fatalf("error %q; want it to contain %q", err, want)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("took %v to find out; the handshake answer is immediate", d)
	}
}

// https:// against a server that accepts and says nothing fails with
// ErrUnreachable within about one timeout, not one for the handshake probe
// and another for the request.
func TestS3HTTPSAgainstSilentServerIsUnreachableInOneTimeout(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	defer func() {
		_ = l.Close()
		<-done
		for _, c := range conns {
			_ = c.Close()
		}
	}()
	const timeout = time.Second
	start := time.Now()
	st, err := storage.Open(testCtx(t), "s3://bucket", storage.Options{Endpoint: "https://" + l.Addr().String(), Timeout: timeout})
	if err == nil {
		_ = st.Close()
		t.Fatal("Open against a silent server succeeded")
	}
	if !errors.Is(err, storage.ErrUnreachable) {
		t.Fatalf("error %v does not wrap ErrUnreachable", err)
	}
	if d := time.Since(start); d > timeout+timeout/2 {
		t.Fatalf("took %v with a %v timeout", d, timeout)
	}
}
