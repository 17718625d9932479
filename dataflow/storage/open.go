package storage

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	neturl "net/url"
	"os"
	"strings"
	"time"
)

// Environment variables Open reads when Options leaves a field empty.
const (
	EnvS3Endpoint   = "REWIND_S3_ENDPOINT"
	EnvAccessKey    = "AWS_ACCESS_KEY_ID"
	EnvSecretKey    = "AWS_SECRET_ACCESS_KEY"
	EnvSessionToken = "AWS_SESSION_TOKEN"
	EnvRegion       = "AWS_REGION"
)

// DefaultTimeout bounds how long Open waits for an S3 service to answer
// before reporting ErrUnreachable.
const DefaultTimeout = 3 * time.Second

// Options configures Open. Every field is optional; the S3 fields are
// ignored for local directories.
type Options struct {
	// Endpoint is the S3 service URL, e.g. "http://127.0.0.1:9000". The
	// scheme decides TLS. Default: $REWIND_S3_ENDPOINT.
	Endpoint string
	// AccessKeyID, SecretAccessKey and SessionToken are the S3 credentials.
	// Default: $AWS_ACCESS_KEY_ID, $AWS_SECRET_ACCESS_KEY, $AWS_SESSION_TOKEN.
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string
	// Region is the S3 region. Default: $AWS_REGION, else "us-east-1".
	Region string
	// Timeout bounds the reachability check Open performs against S3 and
	// the connect phase of every later request. Default: DefaultTimeout.
	Timeout time.Duration
	// CallTimeout is how long one S3 call (Put, Get, List, Delete) may make
	// no progress before it fails with ErrUnreachable: no answer, no byte
	// of the body moving. Default: DefaultCallTimeout.
	CallTimeout time.Duration

	// wrapTransport lets in-package tests observe the HTTP requests.
	wrapTransport func(http.RoundTripper) http.RoundTripper
}

// RawAccess reads and writes an object's stored bytes, checksum trailer
// included, bypassing the checksum. It exists only so tests can tear and
// corrupt objects; production code must never use it. Both stores returned
// by Open implement it.
type RawAccess interface {
	// RawGet returns the stored bytes of name, trailer included.
	RawGet(ctx context.Context, name string) ([]byte, error)
	// RawPut stores raw as the complete stored bytes of name, adding no
	// trailer. It is as atomic as Put.
	RawPut(ctx context.Context, name string, raw []byte) error
}

const acceptedForms = `file://./relative/dir, file:///absolute/dir, a bare directory path, or s3://bucket[/prefix]`

// Open opens durable shared storage at url:
//
//   - "file://./rewind-data", "file:///abs/dir" or a bare path: a local
//     directory, created if missing. Temporary files left by a writer that
//     was killed mid-write are removed.
//   - "s3://bucket/prefix": an S3-compatible service (see Options). The
//     bucket is created if missing; an unreachable service fails within
//     about Options.Timeout with an error wrapping ErrUnreachable.
func Open(ctx context.Context, url string, opts Options) (Store, error) {
	lower := strings.ToLower(url)
	switch {
	case strings.TrimSpace(url) == "":
		return nil, fmt.Errorf("storage: open: empty location; accepted forms: %s", acceptedForms)
	case strings.HasPrefix(lower, "file://"):
		p := url[len("file://"):]
		if p == "" {
			return nil, fmt.Errorf("storage: open %q: no directory after file://; accepted forms: %s", url, acceptedForms)
		}
		return local(openLocal(p))
	case strings.HasPrefix(lower, "s3://"):
		st, err := openS3(ctx, url, opts)
		if err != nil {
			// A nil *s3Store in a Store interface is not nil: never return one.
			return nil, err
		}
		return st, nil
	case strings.Contains(url, "://"):
		return nil, fmt.Errorf("storage: open %q: unsupported scheme; accepted forms: %s", url, acceptedForms)
	default:
		return local(openLocal(url))
	}
}

// local converts openLocal's result without wrapping a nil pointer in a
// non-nil Store.
func local(st *localStore, err error) (Store, error) {
	if err != nil {
		return nil, err
	}
	return st, nil
}

// CheckURL reports whether url is a storage location Open accepts, without
// connecting or creating anything, so a command can reject a mistyped
// --storage before it starts work (and even when it never opens storage).
func CheckURL(url string) error {
	lower := strings.ToLower(url)
	switch {
	case strings.TrimSpace(url) == "":
		return fmt.Errorf("empty storage location; accepted forms: %s", acceptedForms)
	case strings.HasPrefix(lower, "file://"):
		if url[len("file://"):] == "" {
			return fmt.Errorf("storage %q: no directory after file://; accepted forms: %s", url, acceptedForms)
		}
		return checkLocalDir(url[len("file://"):])
	case strings.HasPrefix(lower, "s3://"):
		u, err := neturl.Parse(url)
		if err != nil {
			return fmt.Errorf("storage %q: %w; accepted forms: %s", url, err, acceptedForms)
		}
		if u.Host == "" {
			return fmt.Errorf("storage %q: no bucket; expected s3://bucket[/prefix]", url)
		}
		if prefix := strings.Trim(u.Path, "/"); prefix != "" {
			if err := validName(prefix); err != nil {
				return fmt.Errorf("storage %q: bad prefix: %w", url, err)
			}
		}
		return nil
	case strings.Contains(url, "://"):
		return fmt.Errorf("storage %q: unsupported scheme; accepted forms: %s", url, acceptedForms)
	}
	return checkLocalDir(url)
}

// checkLocalDir accepts a directory or a path that does not exist yet, and
// rejects anything else (a regular file, say).
func checkLocalDir(path string) error {
	fi, err := os.Stat(path)
	if err == nil && !fi.IsDir() {
		return fmt.Errorf("storage %q: exists and is not a directory", path)
	}
	return nil
}

// tmpPrefix starts the name of every file that is still being written.
// List and Get never see such names, and validName rejects them so an
// object can never be mistaken for a leftover.
const tmpPrefix = ".tmp-"

var errStoreClosed = errors.New("store is closed")

// validName reports why name is not a usable object name, or nil. The same
// rules apply to every backend so that a name accepted by one is accepted
// by all: slash-separated, relative, no empty, "." or ".." segments, no
// segment starting with ".tmp-", no backslashes or NUL bytes.
func validName(name string) error {
	if name == "" {
		return errors.New("empty object name")
	}
	if strings.HasPrefix(name, "/") {
		return errors.New("object name must be relative, not start with /")
	}
	if strings.ContainsAny(name, "\\\x00") {
		return errors.New("object name must not contain backslashes or NUL bytes")
	}
	for seg := range strings.SplitSeq(name, "/") {
		switch {
		case seg == "":
			return errors.New("object name has an empty segment (leading, trailing or double slash)")
		case seg == "." || seg == "..":
			return errors.New(`object name must not contain "." or ".." segments`)
		case strings.HasPrefix(seg, tmpPrefix):
			return fmt.Errorf("object name segments must not start with %q (reserved for writes in progress)", tmpPrefix)
		}
	}
	return nil
}

// prefixDir returns the directory part of a List prefix (everything up to
// the last slash) and whether that part could belong to a valid name. A
// prefix that no valid name can start with lists nothing.
func prefixDir(prefix string) (dir string, ok bool) {
	i := strings.LastIndexByte(prefix, '/')
	if i < 0 {
		return "", true
	}
	dir = prefix[:i]
	return dir, validName(dir) == nil
}
