package storage

import (
	"context"
	"io"
	"net/http"
	"os"

	"github.com/minio/minio-go/v7"
)

// Hooks into the implementation for the external tests (package
// storage_test, which can import storagetest without an import cycle).

const (
	TrailerSize = trailerSize
	TmpPrefix   = tmpPrefix
)

// SetWriteHook replaces the payload write of a local store's Put.
func SetWriteHook(s Store, hook func(f *os.File, payload []byte) error) {
	s.(*localStore).writeHook = hook
}

// WriteStreaming writes data to f the way a local store's Put writes a
// payload (without the trailer).
func WriteStreaming(f *os.File, data []byte) error { return writeStreaming(f, data, nil) }

// PutThrough stores payload under name on an S3 store exactly as Put
// would, but streams the body through wrap.
func PutThrough(ctx context.Context, s Store, name string, payload []byte, wrap func(io.Reader) io.Reader) error {
	st := s.(*s3Store)
	body := wrap(&trailerReader{payload: payload, trailer: makeTrailer(payload)})
	return st.putReader(ctx, "put", name, body, int64(len(payload))+trailerSize)
}

// WrapTransport makes Open route an S3 store's requests through wrap.
func WrapTransport(o *Options, wrap func(http.RoundTripper) http.RoundTripper) {
	o.wrapTransport = wrap
}

// S3Key is the bucket key an S3 store uses for name.
func S3Key(s Store, name string) string { return s.(*s3Store).key(name) }

// S3Client is an S3 store's minio client.
func S3Client(s Store) *minio.Client { return s.(*s3Store).client }
