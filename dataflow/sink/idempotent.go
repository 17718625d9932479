package sink

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
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
	metaID     = []byte("id")   // the store's identity (storeRecord.StoreID)
	metaCount  = []byte("rows") // how many keys bucketRows holds, uint64
)

// storeFormat is part of the recorded layout: a store written before rows
// carried their checksum is refused, not misread.
const storeFormat = 2

// rowSumLen is the CRC32C of key and value appended to every stored value:
// bbolt checksums only its meta pages, so a flipped byte in a data page
// would otherwise come back as a wrong number.
const rowSumLen = 4

// idempotentSink upserts rows by write key into a bbolt store that lives in
// the output directory, so it outlives a crashed process. The key is the
// encoded write key only: a replayed row lands on the same key and replaces
// the stored one, never adds to it.
//
// The output directory is not durable storage, so with a journal attached
// the store is checked against the run's record of it (Attach): the store's
// id and, as of the newest commit, at least how many rows it held. Every
// bbolt call goes through guard, which turns the panics bbolt raises on
// damaged pages into an error naming the file.
type idempotentSink struct {
	*base
	db   *bolt.DB
	path string
	id   string // metaID

	journal *Journal
	// recorded is the row count the journal last recorded (-1: none);
	// recMu serialises Commit's records.
	recMu      sync.Mutex
	recorded   int64
	recordedAt time.Time

	recSeq int64 // the log frame the journal last recorded as acknowledged

	dmu     sync.Mutex
	damaged error // set by guard: the store is not used again

	group groupCommit
	lmu   sync.Mutex // log.oldLast and rotation
	log   idemLog
	acked atomic.Int64 // the last log frame fsynced
	ap    applier
}

func openIdempotentSink(b *base) (Sink, error) {
	path := filepath.Join(b.dir, IdempotentStore)
	fi, err := os.Stat(path)
	existed := err == nil && fi.Size() > 0
	s := &idempotentSink{base: b, path: path, recorded: -1}
	err = s.guard(func() error {
		var err error
		s.db, err = bolt.Open(path, 0o644, storeOptions())
		return err
	})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("opening idempotent store %s: still locked after %s; another process (a running rewind?) has this output open", path, storeLockTimeout)
	}
	if err != nil && existed && !errors.Is(err, errDamagedStore) {
		err = s.damage(err)
	}
	if err != nil {
		return nil, fmt.Errorf("opening idempotent store %s: %w", path, err)
	}
	fail := func(err error) (Sink, error) {
		_ = s.guard(s.db.Close)
		return nil, fmt.Errorf("opening idempotent store %s: %w", path, err)
	}
	if existed {
		// A store left by an earlier process is about to be relied on:
		// every page is walked once before it is.
		if err := s.check(); err != nil {
			return fail(err)
		}
	}
	want, err := json.Marshal(map[string]any{"columns": b.shape.cols, "write_key": b.shape.layout.WriteKey, "format": storeFormat})
	if err != nil {
		return fail(err)
	}
	// The stored rows are raw fixed-width encodings of one layout; reading
	// them under another would produce garbage, so the layout is recorded
	// with the rows and checked on every open.
	err = s.update(func(tx *bolt.Tx) error {
		if _, err := tx.CreateBucketIfNotExists(bucketRows); err != nil {
			return err
		}
		meta, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		got := meta.Get(metaLayout)
		if got == nil {
			if err := meta.Put(metaLayout, want); err != nil {
				return err
			}
		} else if !bytes.Equal(got, want) {
			return fmt.Errorf("it holds rows of layout %s, not %s; use another output directory", got, want)
		}
		if id := meta.Get(metaID); id != nil {
			if !validStoreID(string(id)) {
				return s.damage(fmt.Errorf("its id %q is not one a store is given", id))
			}
			s.id = string(id)
			return nil
		}
		s.id = newStoreID()
		return meta.Put(metaID, []byte(s.id))
	})
	if err != nil {
		return fail(err)
	}
	if err := s.replayLog(); err != nil {
		_ = s.log.close()
		return fail(err)
	}
	go s.runApplier()
	return s, nil
}

func newStoreID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// errDamagedStore is wrapped by every error about a damaged store.
var errDamagedStore = errors.New("damaged embedded store")

// damage marks the store damaged by err and returns the error to report.
func (s *idempotentSink) damage(err error) error {
	s.dmu.Lock()
	defer s.dmu.Unlock()
	if s.damaged == nil {
		// One line, whatever bbolt's text holds.
		text := strings.Join(strings.Fields(err.Error()), " ")
		s.damaged = fmt.Errorf("%w %s: %s; rerun without --resume into a fresh output directory (or with --overwrite)", errDamagedStore, s.path, text)
	}
	return s.damaged
}

// guard runs a bbolt call. bbolt trusts its data pages and panics when one
// is not what it expects; here that is a damaged file, reported as such,
// and the store is not touched again.
func (s *idempotentSink) guard(f func() error) (err error) {
	s.dmu.Lock()
	damaged := s.damaged
	s.dmu.Unlock()
	if damaged != nil {
		return damaged
	}
	defer func() {
		if r := recover(); r != nil {
			err = s.damage(fmt.Errorf("%v", r))
		}
	}()
	// A page pointer into the mapping's hole faults; as a panic it is
	// recoverable, as the default fatal signal it is not.
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	return f()
}

func (s *idempotentSink) update(f func(*bolt.Tx) error) error {
	return s.guard(func() error { return s.db.Update(f) })
}

func (s *idempotentSink) view(f func(*bolt.Tx) error) error {
	return s.guard(func() error { return s.db.View(f) })
}

// check runs bbolt's consistency check over the whole store. bbolt runs
// it on a goroutine of its own, where guard's SetPanicOnFault does not
// reach: a page in the mapping's hole (SIGBUS) or a page pointer a flipped
// byte sent astray (SIGSEGV) would kill the process there. So a truncated
// file is caught first by its size, and every key and value is read once
// here, under guard, in key order and with each row's checksum verified,
// before bbolt's check follows the same pages.
func (s *idempotentSink) check() error {
	return s.view(func(tx *bolt.Tx) error {
		if fi, err := os.Stat(s.path); err == nil && fi.Size() < tx.Size() {
			return s.damage(fmt.Errorf("the file has %d bytes, but its header says %d: it was truncated", fi.Size(), tx.Size()))
		}
		if err := s.walk(tx); err != nil {
			return err
		}
		var errs []string
		n := 0
		for err := range tx.Check() {
			if n++; len(errs) < 2 {
				errs = append(errs, err.Error())
			}
		}
		if n > 0 {
			return s.damage(fmt.Errorf("%d inconsistencies, first %s", n, strings.Join(errs, "; ")))
		}
		return nil
	})
}

// walk reads every key and value of every bucket, checking that keys come
// in order and that every row matches its checksum.
func (s *idempotentSink) walk(tx *bolt.Tx) error {
	colBytes := 8 * len(s.shape.cols)
	return tx.ForEach(func(name []byte, b *bolt.Bucket) error {
		var prev []byte
		c := b.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			if prev != nil && bytes.Compare(prev, k) >= 0 {
				return s.damage(fmt.Errorf("bucket %s holds key %x after %x: its pages are out of order", name, k, prev))
			}
			prev = k
			if bytes.Equal(name, bucketRows) {
				if err := s.checkRow(k, v, colBytes); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// count is the number of stored rows, kept in the meta bucket.
func count(tx *bolt.Tx) int64 {
	if v := tx.Bucket(bucketMeta).Get(metaCount); len(v) == 8 {
		return int64(binary.BigEndian.Uint64(v))
	}
	return 0
}

// Attach implements Attacher. The first process of a run records the
// store's id; a later one (--resume) refuses a store that is not that one
// (deleted, truncated or replaced since: bbolt makes a new, empty store of
// a missing or empty file) or that holds fewer rows than the newest commit
// recorded.
func (s *idempotentSink) Attach(j *Journal) error {
	var rows, keys int64
	err := s.view(func(tx *bolt.Tx) error {
		rows, keys = count(tx), int64(tx.Bucket(bucketRows).Stats().KeyN)
		return nil
	})
	if err != nil {
		return err
	}
	if rows != keys {
		return s.damage(fmt.Errorf("it holds %d rows but counted %d when they were written", keys, rows))
	}
	b, err := j.get(storeRecordName)
	if err != nil {
		return err
	}
	s.recMu.Lock()
	defer s.recMu.Unlock()
	if b != nil {
		rec, err := decodeStoreRecord(b)
		if err != nil {
			return fmt.Errorf("the destination's record %s%s is damaged: %w", j.store.URL(), j.name(storeRecordName), err)
		}
		switch {
		case rec.StoreID != s.id:
			return fmt.Errorf("destination %s is not the store this run wrote: it holds %d rows, but the run's record of its destination says store %s with at least %d rows (was it deleted, truncated or replaced?): %s",
				s.path, rows, rec.StoreID, rec.Rows, refuseHint)
		case rows < rec.Rows:
			return fmt.Errorf("destination %s lost rows: it holds %d, but the run's record of its destination says at least %d: %s",
				s.path, rows, rec.Rows, refuseHint)
		case rec.LogSeq > s.acked.Load():
			return fmt.Errorf("destination %s lost acknowledged rows: it and its log %s hold flushes through number %d, but the run's record of its destination says %d were acknowledged (was the log, or %s, deleted or truncated?): %s",
				s.path, s.log.path(IdempotentLog), s.acked.Load(), rec.LogSeq, s.log.path(idemLogOld), refuseHint)
		}
		s.journal, s.recorded, s.recSeq = j, rec.Rows, rec.LogSeq
		return nil
	}
	// Recorded before any flush of this run returns, so a complete
	// recovery point implies the record names this store.
	seq := s.acked.Load()
	if err := j.put(storeRecordName, encodeStoreRecord(storeRecord{StoreID: s.id, Rows: rows, LogSeq: seq})); err != nil {
		return err
	}
	s.journal, s.recorded, s.recSeq = j, rows, seq
	return nil
}

func (s *idempotentSink) Mode() Mode { return Idempotent }

func (s *idempotentSink) Writer(subtask, attempt int) (Writer, error) {
	wb, err := s.newWriterBase(subtask, attempt)
	if err != nil {
		return nil, err
	}
	return &idempotentWriter{writerBase: wb, s: s}, nil
}

// Record implements Sink: every flush of epochs <= epoch returned, so
// their rows are in log frames up to the last one fsynced; that number,
// and the rows the store held (a lower bound), go on record before the
// recovery point is written. A resumed run whose store and log hold fewer
// frames lost acknowledged rows (a deleted or truncated log). One Put per
// recovery point that follows new flushes.
func (s *idempotentSink) Record(int64) error {
	if s.journal == nil {
		return nil
	}
	if err := s.ap.failed(); err != nil {
		return err
	}
	seq := s.acked.Load()
	var rows int64
	if err := s.view(func(tx *bolt.Tx) error { rows = count(tx); return nil }); err != nil {
		return err
	}
	s.recMu.Lock()
	defer s.recMu.Unlock()
	if seq <= s.recSeq && rows <= s.recorded {
		return nil
	}
	seq, rows = max(seq, s.recSeq), max(rows, s.recorded)
	if err := s.journal.put(storeRecordName, encodeStoreRecord(storeRecord{StoreID: s.id, Rows: rows, LogSeq: seq})); err != nil {
		return err
	}
	s.recorded, s.recSeq = rows, seq
	return nil
}

// Commit records as Record does (normally nothing new: the executors call
// Record first).
func (s *idempotentSink) Commit(epoch int64) error { return s.Record(epoch) }

func (s *idempotentSink) Recover(int64) error { return nil }

// Close drops the writers' unflushed rows and closes the store; flushed rows
// are in it or in its log already (the next open applies the log).
func (s *idempotentSink) Close() error {
	if s.closeWriters() {
		return nil
	}
	s.ap.halt()
	s.lmu.Lock()
	lerr := s.log.close()
	s.lmu.Unlock()
	s.dmu.Lock()
	s.damaged = nil // closing is allowed, and needed, after damage
	s.dmu.Unlock()
	if err := s.guard(s.db.Close); err != nil {
		return fmt.Errorf("closing idempotent store %s: %w", s.path, err)
	}
	if lerr != nil {
		return fmt.Errorf("closing idempotent store log %s: %w", s.log.path(IdempotentLog), lerr)
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
	// The export reads the store alone, so the log is drained into it.
	if err := s.ap.drain(); err != nil {
		return fmt.Errorf("exporting idempotent store %s: %w", s.path, err)
	}
	if err := s.resetLog(); err != nil {
		return fmt.Errorf("exporting idempotent store %s: %w", s.path, err)
	}
	sh := s.shape
	name := idempotentExport + extOf(s.format)
	tmp, _, err := writeTemp(s.dir, name, func(w io.Writer) error {
		enc, err := newEncoder(s.format, w, sh)
		if err != nil {
			return err
		}
		err = s.view(func(tx *bolt.Tx) error {
			chunk := exportChunk
			cols := make([][]int64, len(sh.cols))
			for i := range cols {
				cols[i] = make([]int64, 0, chunk)
			}
			c := tx.Bucket(bucketRows).Cursor()
			for k, v := c.First(); k != nil; k, v = c.Next() {
				if err := s.checkRow(k, v, 8*len(cols)); err != nil {
					return err
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

// rowSum is the checksum stored after a row's columns.
func rowSum(k, cols []byte) uint32 {
	return crc32.Update(crc32.Checksum(k, castagnoli), castagnoli, cols)
}

// checkRow verifies a stored value (colBytes of columns and their
// checksum) read under key k.
func (s *idempotentSink) checkRow(k, v []byte, colBytes int) error {
	if len(v) != colBytes+rowSumLen {
		return s.damage(fmt.Errorf("the row stored under key %x has %d bytes, want %d", k, len(v), colBytes+rowSumLen))
	}
	if rowSum(k, v[:colBytes]) != binary.BigEndian.Uint32(v[colBytes:]) {
		return s.damage(fmt.Errorf("the row stored under key %x fails its checksum", k))
	}
	return nil
}
