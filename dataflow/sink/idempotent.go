package sink

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// IdempotentStore is the file name of the idempotent sink's embedded store
// inside the output directory. The leading underscore keeps it invisible.
const IdempotentStore = "_idempotent.db"

// idempotentExport is the base name of the visible files Finish writes.
const idempotentExport = "part-idempotent"

// storeLockTimeout bounds the wait for the store's file lock. bbolt waits
// forever by default, which turns "another process has this output open"
// into a hang; a variable so tests need not wait long.
var storeLockTimeout = 3 * time.Second

// exportChunk is how many rows Finish decodes before handing them to the
// encoder, bounding its memory whatever the store's size. A variable so
// tests can cross chunk boundaries cheaply.
var exportChunk = 1 << 16

var (
	bucketRows = []byte("rows")
	bucketMeta = []byte("meta")
	metaLayout = []byte("layout")
)

// idempotentSink upserts rows by write key into a bbolt store that lives in
// the output directory, so it outlives a crashed process. The key is the
// encoded write key only: a replayed row lands on the same key and replaces
// the stored one, never adds to it.
type idempotentSink struct {
	*base
	db   *bolt.DB
	path string
}

func openIdempotentSink(b *base) (Sink, error) {
	path := filepath.Join(b.dir, IdempotentStore)
	db, err := bolt.Open(path, 0o644, &bolt.Options{Timeout: storeLockTimeout})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("opening idempotent store %s: still locked after %s; another process (a running rewind?) has this output open", path, storeLockTimeout)
	}
	if err != nil {
		return nil, fmt.Errorf("opening idempotent store %s: %w", path, err)
	}
	want, err := json.Marshal(map[string][]string{"columns": b.shape.cols, "write_key": b.shape.layout.WriteKey})
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	// The stored rows are raw fixed-width encodings of one layout; reading
	// them under another would produce garbage, so the layout is recorded
	// with the rows and checked on every open.
	err = db.Update(func(tx *bolt.Tx) error {
		if _, err := tx.CreateBucketIfNotExists(bucketRows); err != nil {
			return err
		}
		meta, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		got := meta.Get(metaLayout)
		if got == nil {
			return meta.Put(metaLayout, want)
		}
		if !bytes.Equal(got, want) {
			return fmt.Errorf("it holds rows of layout %s, not %s; use another output directory", got, want)
		}
		return nil
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("opening idempotent store %s: %w", path, err)
	}
	return &idempotentSink{base: b, db: db, path: path}, nil
}

func (s *idempotentSink) Mode() Mode { return Idempotent }

func (s *idempotentSink) Writer(subtask, attempt int) (Writer, error) {
	wb, err := s.newWriterBase(subtask, attempt)
	if err != nil {
		return nil, err
	}
	return &idempotentWriter{writerBase: wb, s: s}, nil
}

func (s *idempotentSink) Commit(int64) error  { return nil }
func (s *idempotentSink) Recover(int64) error { return nil }

// Close drops the writers' unflushed rows and closes the store; flushed rows
// are in it already.
func (s *idempotentSink) Close() error {
	if s.closeWriters() {
		return nil
	}
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("closing idempotent store %s: %w", s.path, err)
	}
	return nil
}

// Finish exports the whole store, in write-key order, to one visible file
// that replaces any earlier export: the visible output is always exactly
// the store's content as of the last Finish. An export in the other format
// left by an earlier run is removed, or its rows would show twice.
func (s *idempotentSink) Finish() error { return s.FinishWith(nil) }

// FinishWith implements MidFinisher: mid runs once the export is written
// and synced, before it is published.
// (An export a process killed there left under its temporary name is
// removed by the next Open.)
func (s *idempotentSink) FinishWith(mid func() error) error {
	s.mu.Lock()
	closed := s.closed
	s.mu.Unlock()
	if closed {
		return fmt.Errorf("exporting idempotent store %s: sink is closed", s.path)
	}
	sh := s.shape
	name := idempotentExport + extOf(s.format)
	tmp, _, err := writeTemp(s.dir, name, func(w io.Writer) error {
		enc, err := newEncoder(s.format, w, sh)
		if err != nil {
			return err
		}
		err = s.db.View(func(tx *bolt.Tx) error {
			chunk := exportChunk
			cols := make([][]int64, len(sh.cols))
			for i := range cols {
				cols[i] = make([]int64, 0, chunk)
			}
			c := tx.Bucket(bucketRows).Cursor()
			for k, v := c.First(); k != nil; k, v = c.Next() {
				if len(v) != 8*len(cols) {
					return fmt.Errorf("stored row for key %x has %d bytes, want %d", k, len(v), 8*len(cols))
				}
				for i := range cols {
					cols[i] = append(cols[i], int64(binary.BigEndian.Uint64(v[8*i:])))
				}
				if len(cols[0]) == chunk {
					if err := enc.write(cols); err != nil {
						return err
					}
					for i := range cols {
						cols[i] = cols[i][:0]
					}
				}
			}
			if len(cols[0]) > 0 {
				return enc.write(cols)
			}
			return nil
		})
		if err != nil {
			return err
		}
		return enc.close()
	})
	if err != nil {
		return fmt.Errorf("exporting idempotent store %s: %w", s.path, err)
	}
	if mid != nil {
		if err := mid(); err != nil {
			_ = removeIfExists(tmp)
			return err
		}
	}
	final := filepath.Join(s.dir, name)
	if err := os.Rename(tmp, final); err != nil {
		_ = removeIfExists(tmp)
		return fmt.Errorf("exporting idempotent store %s: publishing %s: %w", s.path, final, err)
	}
	other := Parquet
	if s.format == Parquet {
		other = CSV
	}
	if err := removeIfExists(filepath.Join(s.dir, idempotentExport+extOf(other))); err != nil {
		return fmt.Errorf("exporting idempotent store %s: %w", s.path, err)
	}
	if err := syncDir(s.dir); err != nil {
		return fmt.Errorf("exporting idempotent store %s: %w", s.path, err)
	}
	return nil
}

type idempotentWriter struct {
	*writerBase
	s *idempotentSink
}

// Flush upserts everything buffered in one bbolt transaction, which bbolt
// fsyncs before returning: after Flush the rows survive a crash, and a crash
// during it leaves none of them applied. Rows are sorted by key first, as
// bbolt writes ordered keys much faster; the sort is stable so that among
// equal keys and versions the last written wins, as it would unsorted.
func (w *idempotentWriter) Flush(int64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.check(); err != nil {
		return err
	}
	chunks, release, ok := w.takeAll()
	if !ok {
		return nil
	}
	defer release()
	sh := w.sink.shape
	ncols := len(sh.cols)
	keyLen, valLen := 8*len(sh.keyIdx), 8*ncols
	n := 0
	for _, c := range chunks {
		n += len(c[0])
	}
	// bbolt requires keys and values to stay untouched until the
	// transaction ends, so each row gets its own bytes in one slab.
	slab := make([]byte, n*(keyLen+valLen))
	type kv struct{ k, v []byte }
	rows := make([]kv, 0, n)
	for _, cols := range chunks {
		for r := range cols[0] {
			k, v := slab[:keyLen:keyLen], slab[keyLen:keyLen+valLen:keyLen+valLen]
			slab = slab[keyLen+valLen:]
			for i, ki := range sh.keyIdx {
				// Flipping the sign bit makes byte order match numeric
				// order, so the export comes out sorted by key.
				binary.BigEndian.PutUint64(k[8*i:], uint64(cols[ki][r])^(1<<63))
			}
			for c := range cols {
				binary.BigEndian.PutUint64(v[8*c:], uint64(cols[c][r]))
			}
			rows = append(rows, kv{k, v})
		}
	}
	slices.SortStableFunc(rows, func(a, b kv) int { return bytes.Compare(a.k, b.k) })
	vo := 8 * sh.verIdx
	err := w.s.db.Update(func(tx *bolt.Tx) error {
		bk := tx.Bucket(bucketRows)
		for _, r := range rows {
			if old := bk.Get(r.k); old != nil {
				if len(old) != valLen {
					return fmt.Errorf("stored row for key %x has %d bytes, want %d", r.k, len(old), valLen)
				}
				// Greater version wins; an equal one replaces (a replay
				// writes the same row again).
				if int64(binary.BigEndian.Uint64(old[vo:])) > int64(binary.BigEndian.Uint64(r.v[vo:])) {
					continue
				}
			}
			if err := bk.Put(r.k, r.v); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return w.fail(fmt.Errorf("idempotent flush of subtask %d attempt %d into %s: %w", w.subtask, w.attempt, w.s.path, err))
	}
	return nil
}

func (w *idempotentWriter) Close() error { return w.close() }
