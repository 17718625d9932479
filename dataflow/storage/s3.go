package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// s3MaxRetries caps minio-go's retries (default 10, with backoff) so a dead
// service fails an operation in seconds rather than minutes.
const s3MaxRetries = 3

// s3ResponseTimeout bounds the wait for response headers once a request
// has been sent: generous, because a large PUT is answered only after the
// server has stored it.
const s3ResponseTimeout = 60 * time.Second

// s3Store keeps each object as one S3 object under prefix. A PUT of a
// known-length body is atomic on S3: the object appears whole or not at
// all, so no temporary names are needed.
type s3Store struct {
	url       string // s3://bucket[/prefix]
	endpoint  string
	bucket    string
	keyPrefix string // "" or "prefix/"
	client    *minio.Client
	core      minio.Core
	transport *http.Transport
	closed    atomic.Bool
	// callTimeout is how long one call may make no progress (watchdog).
	callTimeout time.Duration
}

var _ RawAccess = (*s3Store)(nil)

func openS3(ctx context.Context, rawURL string, opts Options) (*s3Store, error) {
	u, err := neturl.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("storage: open %q: %w; accepted forms: %s", rawURL, err, acceptedForms)
	}
	bucket := u.Host
	if bucket == "" {
		return nil, fmt.Errorf("storage: open %q: no bucket; expected s3://bucket[/prefix]", rawURL)
	}
	prefix := strings.Trim(u.Path, "/")
	if prefix != "" {
		if err := validName(prefix); err != nil {
			return nil, fmt.Errorf("storage: open %q: bad prefix: %w", rawURL, err)
		}
	}
	s := &s3Store{url: "s3://" + bucket, bucket: bucket}
	if prefix != "" {
		s.url += "/" + prefix
		s.keyPrefix = prefix + "/"
	}

	endpoint := firstNonEmpty(opts.Endpoint, os.Getenv(EnvS3Endpoint))
	if endpoint == "" {
		return nil, fmt.Errorf("storage: open %s: no S3 endpoint: set Options.Endpoint (--s3-endpoint) or $%s, e.g. http://127.0.0.1:9000",
			s.url, EnvS3Endpoint)
	}
	eu, err := ParseEndpoint(endpoint)
	if err != nil {
		return nil, fmt.Errorf("storage: open %s: %w", s.url, err)
	}
	s.endpoint = eu.String()
	secure := eu.Scheme == "https"
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}

	tr, err := minio.DefaultTransport(secure)
	if err != nil {
		return nil, fmt.Errorf("storage: open %s: %w", s.url, err)
	}
	tr.DialContext = (&net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}).DialContext
	tr.TLSHandshakeTimeout = timeout
	tr.ResponseHeaderTimeout = s3ResponseTimeout
	s.transport = tr
	s.callTimeout = opts.CallTimeout
	if s.callTimeout <= 0 {
		s.callTimeout = DefaultCallTimeout
	}
	var rt http.RoundTripper = tr
	if opts.wrapTransport != nil {
		rt = opts.wrapTransport(tr)
	}

	creds := credentials.NewStaticV4(
		firstNonEmpty(opts.AccessKeyID, os.Getenv(EnvAccessKey)),
		firstNonEmpty(opts.SecretAccessKey, os.Getenv(EnvSecretKey)),
		firstNonEmpty(opts.SessionToken, os.Getenv(EnvSessionToken)))
	s.client, err = minio.New(eu.Host, &minio.Options{
		Creds:        creds,
		Secure:       secure,
		Transport:    rt,
		Region:       firstNonEmpty(opts.Region, os.Getenv(EnvRegion), "us-east-1"),
		BucketLookup: minio.BucketLookupPath,
		MaxRetries:   s3MaxRetries,
	})
	if err != nil {
		return nil, fmt.Errorf("storage: open %s at %s: %w", s.url, endpoint, err)
	}
	s.core = minio.Core{Client: s.client}
	if err := s.ensureBucket(ctx, eu, timeout); err != nil {
		tr.CloseIdleConnections()
		return nil, err
	}
	return s, nil
}

// ensureBucket checks quickly that the service answers and creates the
// bucket if needed. A plain TCP dial first turns "nothing listens there"
// into an immediate error instead of a series of retried requests (skipped
// when an HTTP proxy stands between us and the endpoint).
func (s *s3Store) ensureBucket(ctx context.Context, eu *neturl.URL, timeout time.Duration) error {
	var proxy *neturl.URL
	if s.transport.Proxy != nil {
		proxy, _ = s.transport.Proxy(&http.Request{URL: eu})
	}
	if proxy == nil {
		host := eu.Host
		if eu.Port() == "" {
			if eu.Scheme == "https" {
				host = net.JoinHostPort(eu.Hostname(), "443")
			} else {
				host = net.JoinHostPort(eu.Hostname(), "80")
			}
		}
		d := net.Dialer{Timeout: timeout}
		conn, err := d.DialContext(ctx, "tcp", host)
		if err != nil {
			return fmt.Errorf("storage: open %s: S3 endpoint %s: %w: %w", s.url, s.endpoint, ErrUnreachable, err)
		}
		if eu.Scheme == "https" {
			err = plainHTTPAt(conn, eu, timeout)
		}
		_ = conn.Close()
		if err != nil {
			return fmt.Errorf("storage: open %s: %w", s.url, err)
		}
	}

	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	exists, err := s.client.BucketExists(cctx, s.bucket)
	if err != nil {
		if ctx.Err() == nil && (cctx.Err() != nil || isNetError(err)) {
			return fmt.Errorf("storage: open %s: S3 endpoint %s did not answer within %v: %w: %w",
				s.url, s.endpoint, timeout, ErrUnreachable, err)
		}
		return fmt.Errorf("storage: open %s: checking bucket %q at %s: %w", s.url, s.bucket, s.endpoint, err)
	}
	if exists {
		return nil
	}
	err = s.client.MakeBucket(cctx, s.bucket, minio.MakeBucketOptions{})
	if err != nil {
		// Another process may have created it meanwhile.
		if code := minio.ToErrorResponse(err).Code; code == "BucketAlreadyOwnedByYou" || code == "BucketAlreadyExists" {
			if ok, _ := s.client.BucketExists(cctx, s.bucket); ok {
				return nil
			}
		}
		return fmt.Errorf("storage: open %s: creating bucket %q at %s: %w", s.url, s.bucket, s.endpoint, err)
	}
	return nil
}

func firstNonEmpty(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

// isNetError reports a failure to talk to the service at all, as opposed
// to an answer from it.
func isNetError(err error) bool {
	var ue *neturl.Error
	var ne net.Error
	return errors.As(err, &ue) || errors.As(err, &ne)
}

func (s *s3Store) key(name string) string { return s.keyPrefix + name }

// errf wraps an S3 failure with the operation and object, mapping a
// missing key to ErrNotFound and a network failure or a call its watchdog
// cancelled (cctx, derived from the caller's ctx) to ErrUnreachable.
func (s *s3Store) errf(ctx, cctx context.Context, op, name string, err error) error {
	where := fmt.Sprintf("storage: %s %q in %s", op, name, s.url)
	if idle, ok := stalled(ctx, cctx); ok {
		return fmt.Errorf("%s: S3 endpoint %s did not answer for %v: %w", where, s.endpoint, idle, ErrUnreachable)
	}
	switch code := minio.ToErrorResponse(err).Code; {
	case code == minio.NoSuchKey:
		return fmt.Errorf("%s: %w", where, ErrNotFound)
	case code == minio.NoSuchBucket:
		return fmt.Errorf("%s: bucket %q does not exist at %s: %w", where, s.bucket, s.endpoint, err)
	case ctx.Err() == nil && isNetError(err):
		return fmt.Errorf("%s: S3 endpoint %s: %w: %w", where, s.endpoint, ErrUnreachable, err)
	}
	return fmt.Errorf("%s: %w", where, err)
}

func (s *s3Store) check(ctx context.Context, op, name string) error {
	if s.closed.Load() {
		return fmt.Errorf("storage: %s %q in %s: %w", op, name, s.url, errStoreClosed)
	}
	if err := validName(name); err != nil {
		return fmt.Errorf("storage: %s %q in %s: %w", op, name, s.url, err)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("storage: %s %q in %s: %w", op, name, s.url, err)
	}
	return nil
}

// Put implements Store.
func (s *s3Store) Put(ctx context.Context, name string, data []byte) error {
	if err := s.check(ctx, "put", name); err != nil {
		return err
	}
	r := &trailerReader{payload: data, trailer: makeTrailer(data)}
	return s.putReader(ctx, "put", name, r, int64(len(data))+trailerSize)
}

// RawPut implements RawAccess.
func (s *s3Store) RawPut(ctx context.Context, name string, raw []byte) error {
	if err := s.check(ctx, "raw put", name); err != nil {
		return err
	}
	return s.putReader(ctx, "raw put", name, &trailerReader{payload: raw, noTrailer: true}, int64(len(raw)))
}

// putReader uploads exactly size bytes from r as one PUT request: with the
// length known and multipart disabled, the object is published whole or
// not at all. A seekable r lets minio-go retry.
func (s *s3Store) putReader(ctx context.Context, op, name string, r io.Reader, size int64) error {
	cctx, w := watch(ctx, s.callTimeout)
	defer w.stop()
	if tr, ok := r.(*trailerReader); ok {
		tr.w = w
	} else {
		r = progressReader{r: r, w: w}
	}
	_, err := s.client.PutObject(w.traced(cctx), s.bucket, s.key(name), r, size, minio.PutObjectOptions{
		ContentType:      "application/octet-stream",
		DisableMultipart: true,
	})
	if err != nil {
		return s.errf(ctx, cctx, op, name, err)
	}
	return nil
}

// Get implements Store.
func (s *s3Store) Get(ctx context.Context, name string) ([]byte, error) {
	raw, err := s.getRaw(ctx, "get", name)
	if err != nil {
		return nil, err
	}
	payload, err := verifyStored(raw)
	if err != nil {
		return nil, fmt.Errorf("storage: get %q in %s: %w", name, s.url, err)
	}
	return payload, nil
}

// RawGet implements RawAccess.
func (s *s3Store) RawGet(ctx context.Context, name string) ([]byte, error) {
	return s.getRaw(ctx, "raw get", name)
}

func (s *s3Store) getRaw(ctx context.Context, op, name string) ([]byte, error) {
	if err := s.check(ctx, op, name); err != nil {
		return nil, err
	}
	cctx, w := watch(ctx, s.callTimeout)
	defer w.stop()
	// Core.GetObject is one request with the size in hand; the higher-level
	// Client.GetObject adds a goroutine and lazy requests we do not need.
	body, info, _, err := s.core.GetObject(cctx, s.bucket, s.key(name), minio.GetObjectOptions{})
	if err != nil {
		return nil, s.errf(ctx, cctx, op, name, err)
	}
	defer body.Close()
	if info.Size < 0 {
		return nil, fmt.Errorf("storage: %s %q in %s: server sent no object length", op, name, s.url)
	}
	w.progress()
	raw := make([]byte, info.Size)
	if _, err := io.ReadFull(progressReader{r: body, w: w}, raw); err != nil {
		return nil, s.errf(ctx, cctx, op, name, fmt.Errorf("reading object body: %w", err))
	}
	return raw, nil
}

// List implements Store.
func (s *s3Store) List(ctx context.Context, prefix string) ([]Object, error) {
	if s.closed.Load() {
		return nil, fmt.Errorf("storage: list %q in %s: %w", prefix, s.url, errStoreClosed)
	}
	if _, ok := prefixDir(prefix); !ok {
		return []Object{}, nil
	}
	cctx, w := watch(ctx, s.callTimeout)
	defer w.stop()
	objs := []Object{}
	for info := range s.client.ListObjectsIter(cctx, s.bucket, minio.ListObjectsOptions{
		Prefix:    s.key(prefix),
		Recursive: true,
	}) {
		w.progress()
		if info.Err != nil {
			return nil, s.errf(ctx, cctx, "list", prefix, info.Err)
		}
		name, ok := strings.CutPrefix(info.Key, s.keyPrefix)
		// Skip keys no Put could have written (directory markers, foreign
		// objects), as the local store skips foreign files.
		if !ok || validName(name) != nil {
			continue
		}
		objs = append(objs, Object{Name: name, Size: payloadSize(info.Size), ModTime: info.LastModified})
	}
	// minio-go ends a listing silently when its context is cancelled (before
	// the first page or between pages): without this check a deadline or a
	// cancelled run would pass for a short listing, and a restore could
	// take "no recovery point" for an answer.
	if err := cctx.Err(); err != nil {
		return nil, s.errf(ctx, cctx, "list", prefix, err)
	}
	sort.Slice(objs, func(i, j int) bool { return objs[i].Name < objs[j].Name })
	return objs, nil
}

// Delete implements Store.
func (s *s3Store) Delete(ctx context.Context, name string) error {
	if err := s.check(ctx, "delete", name); err != nil {
		return err
	}
	cctx, w := watch(ctx, s.callTimeout)
	defer w.stop()
	err := s.client.RemoveObject(cctx, s.bucket, s.key(name), minio.RemoveObjectOptions{})
	if err != nil && minio.ToErrorResponse(err).Code != minio.NoSuchKey {
		return s.errf(ctx, cctx, "delete", name, err)
	}
	return nil
}

// URL implements Store: s3://bucket[/prefix], without the endpoint.
func (s *s3Store) URL() string { return s.url }

// Close implements Store: it releases idle connections. Later calls fail.
func (s *s3Store) Close() error {
	s.closed.Store(true)
	s.transport.CloseIdleConnections()
	return nil
}

// trailerReader streams payload then trailer without concatenating them.
// It is seekable so minio-go can rewind it to retry a failed request.
type trailerReader struct {
	payload   []byte
	trailer   [trailerSize]byte
	noTrailer bool
	off       int64
	w         *watchdog // told of every read, and of the last byte; may be nil
}

func (r *trailerReader) size() int64 {
	if r.noTrailer {
		return int64(len(r.payload))
	}
	return int64(len(r.payload)) + trailerSize
}

func (r *trailerReader) Read(p []byte) (int, error) {
	if r.off >= r.size() {
		return 0, io.EOF
	}
	n := 0
	if r.off < int64(len(r.payload)) {
		n = copy(p, r.payload[r.off:])
	}
	if !r.noTrailer && n < len(p) {
		toff := r.off + int64(n) - int64(len(r.payload))
		n += copy(p[n:], r.trailer[toff:])
	}
	r.off += int64(n)
	if r.w != nil {
		if r.off >= r.size() {
			r.w.sent(r.size())
		} else {
			r.w.progress()
		}
	}
	return n, nil
}

func (r *trailerReader) Seek(offset int64, whence int) (int64, error) {
	var abs int64
	switch whence {
	case io.SeekStart:
		abs = offset
	case io.SeekCurrent:
		abs = r.off + offset
	case io.SeekEnd:
		abs = r.size() + offset
	default:
		return 0, errors.New("trailerReader.Seek: invalid whence")
	}
	if abs < 0 {
		return 0, errors.New("trailerReader.Seek: negative position")
	}
	r.off = abs
	return abs, nil
}
