package storage

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	neturl "net/url"
	"strings"
	"time"
)

// ParseEndpoint checks an S3 endpoint and returns it as a URL with scheme
// http or https, a host and no path. A host:port without a scheme is taken
// as http:// when the host is a loopback address (127.0.0.0/8, ::1,
// localhost): that is how a local test server is reached, and plain HTTP
// cannot leave the machine there. Anywhere else the scheme decides whether
// credentials travel encrypted, so it must be written. An error says what
// was given and what is allowed.
func ParseEndpoint(endpoint string) (*neturl.URL, error) {
	const want = "want http://host:port or https://host[:port] (a scheme-less host:port is taken as http only on loopback)"
	if !strings.Contains(endpoint, "://") {
		host, port, err := net.SplitHostPort(endpoint)
		if err != nil || port == "" || !isLoopback(host) {
			return nil, fmt.Errorf("bad S3 endpoint %q: %s", endpoint, want)
		}
		endpoint = "http://" + endpoint
	}
	u, err := neturl.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.Trim(u.Path, "/") != "" ||
		u.RawQuery != "" || u.User != nil {
		return nil, fmt.Errorf("bad S3 endpoint %q: %s", endpoint, want)
	}
	if p := u.Port(); p != "" {
		if _, err := net.LookupPort("tcp", p); err != nil {
			return nil, fmt.Errorf("bad S3 endpoint %q: port %q is not a port number; %s", endpoint, p, want)
		}
	}
	u.Path = ""
	return u, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// errPlainHTTP is plainHTTPAt's finding.
var errPlainHTTP = errors.New("speaks plain HTTP, not TLS")

// plainHTTPAt reports, on a fresh connection to an https:// endpoint,
// whether the server answers a TLS handshake in plain HTTP: the client
// would otherwise retry until its timeout and report a server that did not
// answer, when the fix is to write http://. Any other handshake outcome is
// left to the S3 client to report, but for silence, which is reported as
// ErrUnreachable at once.
func plainHTTPAt(conn net.Conn, u *neturl.URL, timeout time.Duration) error {
	_ = conn.SetDeadline(time.Now().Add(timeout))
	// Only the record layer matters here; the S3 client verifies the
	// certificate on its own connections.
	c := tls.Client(conn, &tls.Config{ServerName: u.Hostname(), InsecureSkipVerify: true})
	err := c.Handshake()
	var rh tls.RecordHeaderError
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		// A silent server: say so now rather than after a second timeout.
		return fmt.Errorf("S3 endpoint %s did not answer a TLS handshake within %v: %w: %w", u.Redacted(), timeout, ErrUnreachable, err)
	case !errors.As(err, &rh):
		return nil
	case strings.HasPrefix(string(rh.RecordHeader[:]), "HTTP/"):
		return fmt.Errorf("S3 endpoint %s: the server at %s %w; use http://%s", u.Redacted(), u.Host, errPlainHTTP, u.Host)
	default:
		return fmt.Errorf("S3 endpoint %s: the server at %s does not speak TLS (it answered a handshake with %q); if it serves plain HTTP, use http://%s",
			u.Redacted(), u.Host, rh.RecordHeader[:], u.Host)
	}
}
