package sink

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// A run is one immutable file of the idempotent store: a header (magic,
// the store's id, the run's number, the row length, CRC32C of those),
// then store rows (key, columns, row checksum) sorted by key, each key
// once. The manifest (idemstore.go) names every live run with its size
// and the CRC32C of the whole file, so a run is checked against what was
// written before anything it holds is used.

var idemRunMagic = []byte("RWIDRUN1")

const idemRunHeaderLen = 8 + 32 + 8 + 4 + 4

// runPrefix and runSuffix frame a run's file name: _idempotent-<number>.run.
const (
	runPrefix = "_idempotent-"
	runSuffix = ".run"
)

func runName(num int64) string { return fmt.Sprintf("%s%08d%s", runPrefix, num, runSuffix) }

// runNumber parses a run's file name; ok is false for any other name.
func runNumber(name string) (int64, bool) {
	rest, ok := strings.CutPrefix(name, runPrefix)
	if !ok {
		return 0, false
	}
	digits, ok := strings.CutSuffix(rest, runSuffix)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(digits, 10, 64)
	return n, err == nil && n > 0
}

// runMeta is what the manifest says of a run.
type runMeta struct {
	num, rows, size int64
	crc             uint32
}

// runWriter writes one run under a temporary name; done makes it durable
// under its own name.
type runWriter struct {
	dir, tmp string
	f        *os.File
	bw       *bufio.Writer
	h        hash.Hash32 // of everything written, as the manifest records it
	meta     runMeta
	rowLen   int
}

// createRun starts run num; a paced one goes to the device as it is
// written (pacedFileWriter), for the merger's large runs.
func createRun(dir, id string, num int64, rowLen int, paced bool) (*runWriter, error) {
	f, err := os.CreateTemp(dir, tmpPrefix+"idempotent-run-*")
	if err != nil {
		return nil, err
	}
	w := &runWriter{dir: dir, tmp: f.Name(), f: f, rowLen: rowLen, meta: runMeta{num: num}}
	w.h = crc32.New(castagnoli)
	var fw io.Writer = f
	size := 1 << 20
	if paced {
		fw, size = &pacedFileWriter{f: f}, pacedChunk
	}
	w.bw = bufio.NewWriterSize(io.MultiWriter(fw, w.h), size)
	h := make([]byte, idemRunHeaderLen)
	copy(h, idemRunMagic)
	copy(h[8:], id)
	binary.BigEndian.PutUint64(h[40:], uint64(num))
	binary.BigEndian.PutUint32(h[48:], uint32(rowLen))
	binary.BigEndian.PutUint32(h[52:], crc32.Checksum(h[:52], castagnoli))
	if _, err := w.bw.Write(h); err != nil {
		w.abort()
		return nil, err
	}
	return w, nil
}

func (w *runWriter) add(row []byte) error {
	w.meta.rows++
	_, err := w.bw.Write(row)
	return err
}

// done flushes, fsyncs and renames the run onto its name. The directory
// is synced by the manifest write that follows and names it.
func (w *runWriter) done() (runMeta, error) {
	err := w.bw.Flush()
	if err == nil {
		err = w.f.Sync()
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(w.tmp, filepath.Join(w.dir, runName(w.meta.num)))
	}
	if err != nil {
		_ = os.Remove(w.tmp)
		return runMeta{}, fmt.Errorf("writing run %s: %w", filepath.Join(w.dir, runName(w.meta.num)), err)
	}
	w.meta.size = idemRunHeaderLen + w.meta.rows*int64(w.rowLen)
	w.meta.crc = w.h.Sum32()
	return w.meta, nil
}

func (w *runWriter) abort() {
	_ = w.f.Close()
	_ = os.Remove(w.tmp)
}

// errRunDamaged marks a run file that is not what the manifest says.
var errRunDamaged = errors.New("damaged run")

// runReader reads a run's rows in order. Its size is checked on open and
// its checksum once the last row is read: a reader that returns io.EOF
// has returned exactly the rows written.
type runReader struct {
	path   string
	f      *os.File
	br     *bufio.Reader
	h      hash.Hash32
	meta   runMeta
	left   int64
	keyLen int
	row    []byte
	prev   []byte
}

func openRun(dir, id string, m runMeta, rowLen, keyLen, bufSize int) (*runReader, error) {
	path := filepath.Join(dir, runName(m.num))
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w %s: %s", errRunDamaged, path, fmt.Sprintf(format, a...))
	}
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, bad("it is missing, but the manifest names it with %d rows", m.rows)
		}
		return nil, err
	}
	fail := func(err error) (*runReader, error) { f.Close(); return nil, err }
	fi, err := f.Stat()
	if err != nil {
		return fail(err)
	}
	if fi.Size() != m.size || m.size != idemRunHeaderLen+m.rows*int64(rowLen) {
		return fail(bad("it has %d bytes, but the manifest says %d rows of %d bytes in %d", fi.Size(), m.rows, rowLen, m.size))
	}
	r := &runReader{path: path, f: f, h: crc32.New(castagnoli), meta: m, left: m.rows, keyLen: keyLen,
		row: make([]byte, rowLen), prev: make([]byte, 0, keyLen)}
	r.br = bufio.NewReaderSize(io.TeeReader(f, r.h), bufSize)
	h := make([]byte, idemRunHeaderLen)
	if _, err := io.ReadFull(r.br, h); err != nil {
		return fail(bad("reading its header: %v", err))
	}
	ok := bytes.Equal(h[:8], idemRunMagic) && crc32.Checksum(h[:52], castagnoli) == binary.BigEndian.Uint32(h[52:])
	switch {
	case !ok:
		return fail(bad("its header fails its checksum"))
	case string(h[8:40]) != id || int64(binary.BigEndian.Uint64(h[40:])) != m.num || int(binary.BigEndian.Uint32(h[48:])) != rowLen:
		return fail(bad("its header names another store, run or row length than the manifest"))
	}
	return r, nil
}

// next returns the next row (valid until the following call), or io.EOF
// once every row is read and the file matched its checksum.
func (r *runReader) next() ([]byte, error) {
	if r.left == 0 {
		if r.h.Sum32() != r.meta.crc {
			return nil, fmt.Errorf("%w %s: it fails its checksum (crc32c %08x, the manifest says %08x)", errRunDamaged, r.path, r.h.Sum32(), r.meta.crc)
		}
		return nil, io.EOF
	}
	if _, err := io.ReadFull(r.br, r.row); err != nil {
		return nil, fmt.Errorf("%w %s: reading row %d: %v", errRunDamaged, r.path, r.meta.rows-r.left, err)
	}
	k := r.row[:r.keyLen]
	if r.left < r.meta.rows && bytes.Compare(r.prev, k) >= 0 {
		return nil, fmt.Errorf("%w %s: row %d is out of key order", errRunDamaged, r.path, r.meta.rows-r.left)
	}
	r.prev = append(r.prev[:0], k...)
	r.left--
	return r.row, nil
}

func (r *runReader) close() { r.f.Close() }

// verifyRun reads a whole run, checking its size, header, order and
// checksum.
func verifyRun(dir, id string, m runMeta, rowLen, keyLen int) error {
	r, err := openRun(dir, id, m, rowLen, keyLen, 1<<20)
	if err != nil {
		return err
	}
	defer r.close()
	for {
		if _, err := r.next(); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
	}
}
