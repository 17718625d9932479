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
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// IdempotentStore is the file name of the idempotent store's manifest
// inside the output directory (idemstore.go): it names the run files
// _idempotent-<n>.run beside it. The leading underscore keeps them
// invisible.
const IdempotentStore = "_idempotent.db"

// idemLockName is the file a process holds locked while it has the
// store open.
const idemLockName = "_idempotent.lock"

// idempotentExport is the base name of the visible files Finish writes.
const idempotentExport = "part-idempotent"

// storeLockTimeout bounds the wait for the store's file lock, so that
// "another process has this output open" is an error, not a hang; a
// variable so tests need not wait long.
var storeLockTimeout = 3 * time.Second

// exportChunk is how many rows Finish decodes before handing them to the
// encoder, bounding its memory whatever the store's size. A variable so
// tests can cross chunk boundaries cheaply.
var exportChunk = 1 << 16

// storeFormat is part of the recorded layout: a store of another format
// (2: bbolt with row checksums) is refused, not misread.
const storeFormat = 3

// rowSumLen is the CRC32C of key and value appended to every stored row.
const rowSumLen = 4

// idempotentSink upserts rows by write key into a store of sorted runs
// that lives in the output directory, so it outlives a crashed process.
// The key is the encoded write key only: a replayed row lands on the same
// key and replaces the stored one, never adds to it.
//
// The output directory is not durable storage, so with a journal attached
// the store is checked against the run's record of it (Attach): the store's
// id and, as of the newest commit, at least how many rows it held; every
// run is read and checked against its manifest entry before it is used.
type idempotentSink struct {
	*base
	path   string // the manifest
	id     string
	st     runStore
	unlock func()

	journal *Journal
	// recorded is the row count the journal last recorded (-1: none);
	// recMu serialises Commit's records.
	recMu    sync.Mutex
	recorded int64

	recSeq int64 // the log frame the journal last recorded as acknowledged

	dmu     sync.Mutex
	damaged error // the store is not used again

	group groupCommit
	lmu   sync.Mutex // log.oldLast and rotation
	log   idemLog
	acked atomic.Int64 // the last log frame fsynced
	ap    applier
}

func openIdempotentSink(b *base) (Sink, error) {
	path := filepath.Join(b.dir, IdempotentStore)
	s := &idempotentSink{base: b, path: path, recorded: -1}
	unlock, err := lockStore(filepath.Join(b.dir, idemLockName), storeLockTimeout)
	if errors.Is(err, errStoreLocked) {
		return nil, fmt.Errorf("opening idempotent store %s: still locked after %s; another process (a running rewind?) has this output open", path, storeLockTimeout)
	}
	if err != nil {
		return nil, fmt.Errorf("opening idempotent store %s: %w", path, err)
	}
	s.unlock = unlock
	fail := func(err error) (Sink, error) {
		_ = s.log.close()
		unlock()
		return nil, fmt.Errorf("opening idempotent store %s: %w", path, err)
	}
	want, err := json.Marshal(map[string]any{"columns": b.shape.cols, "write_key": b.shape.layout.WriteKey, "format": storeFormat})
	if err != nil {
		return fail(err)
	}
	sh := b.shape
	keyLen := 8 * len(sh.keyIdx)
	s.st = runStore{dir: b.dir, path: path, keyLen: keyLen, rowLen: keyLen + 8*len(sh.cols) + rowSumLen, verOff: keyLen + 8*sh.verIdx}
	m, present, err := readManifest(path)
	if err != nil {
		if !present {
			return fail(err)
		}
		return fail(s.damage(err))
	}
	if !present {
		m = manifest{layout: want, id: newStoreID(), nextRun: 1}
		if err := s.st.writeManifest(m); err != nil {
			return fail(err)
		}
	} else if !bytes.Equal(m.layout, want) {
		// The stored rows are raw fixed-width encodings of one layout;
		// reading them under another would produce garbage.
		return fail(fmt.Errorf("it holds rows of layout %s, not %s; use another output directory", m.layout, want))
	}
	s.st.man, s.st.id, s.id = m, m.id, m.id
	if err := s.st.removeOrphans(); err != nil {
		return fail(err)
	}
	// Runs left by an earlier process are about to be relied on: each is
	// read whole and checked against the manifest first.
	for _, r := range m.runs {
		if err := verifyRun(b.dir, m.id, r, s.st.rowLen, keyLen); err != nil {
			return fail(s.damage(err))
		}
	}
	if err := s.replayLog(); err != nil {
		return fail(err)
	}
	s.st.fail = func(err error) { s.ap.fail(s.storeErr(err)) }
	s.st.startMerger()
	signal(s.st.wake) // runs the log replay added may be due a merge
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
		text := strings.Join(strings.Fields(err.Error()), " ")
		s.damaged = fmt.Errorf("%w %s: %s; rerun without --resume into a fresh output directory (or with --overwrite)", errDamagedStore, s.path, text)
	}
	return s.damaged
}

// isDamaged returns the damage found, if any.
func (s *idempotentSink) isDamaged() error {
	s.dmu.Lock()
	defer s.dmu.Unlock()
	return s.damaged
}

// storeErr reports an error of the store's files as damage when it is one.
func (s *idempotentSink) storeErr(err error) error {
	if errors.Is(err, errRunDamaged) {
		return s.damage(err)
	}
	return err
}

// Attach implements Attacher. The first process of a run records the
// store's id; a later one (--resume) refuses a store that is not that one
// (deleted, truncated or replaced since: a missing or empty manifest
// opens as a new, empty store) or that holds fewer rows than the newest
// commit recorded.
func (s *idempotentSink) Attach(j *Journal) error {
	rows := s.st.rowsAtLeast()
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
	rows := s.st.rowsAtLeast()
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
	s.st.stopMerger()
	s.lmu.Lock()
	lerr := s.log.close()
	s.lmu.Unlock()
	s.unlock()
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
	tmp, _, err := writeTemp(s.dir, name, nil, func(w io.Writer) error {
		enc, err := newEncoder(s.format, w, sh)
		if err != nil {
			return err
		}
		chunk := exportChunk
		cols := make([][]int64, len(sh.cols))
		for i := range cols {
			cols[i] = make([]int64, 0, chunk)
		}
		keyLen := s.st.keyLen
		err = s.st.each(func(row []byte) error {
			if err := s.checkRow(row[:keyLen], row[keyLen:], 8*len(cols)); err != nil {
				return err
			}
			v := row[keyLen:]
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
			return nil
		})
		if err == nil && len(cols[0]) > 0 {
			err = enc.write(cols)
		}
		err = s.storeErr(err)
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
