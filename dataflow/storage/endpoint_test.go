package storage_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
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
