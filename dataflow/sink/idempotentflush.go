package sink

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"slices"
	"sync"

	bolt "go.etcd.io/bbolt"
)

// storeOptions are the bbolt options of the idempotent store. The lock
// timeout keeps a second process from hanging. The freelist stays synced
// with every transaction: without it bbolt rebuilds the list at open by
// walking the pages on a goroutine of its own, where a damaged page is a
// panic guard cannot catch. The hashmap freelist keeps allocation cheap
// in a large store.
func storeOptions() *bolt.Options {
	return &bolt.Options{Timeout: storeLockTimeout, FreelistType: bolt.FreelistMapType}
}

// upsert is one row encoded for the store: key and value (columns, then
// their checksum).
type upsert struct{ k, v []byte }

// flushReq is one writer's flush waiting for the transaction that covers it.
type flushReq struct {
	rows []upsert
	done chan flushResult
}

// flushResult tells a waiting flush how its transaction ended, or that it
// is to run the next transaction itself.
type flushResult struct {
	err  error
	lead bool
}

// groupCommit gathers the flushes of every writer that arrive while a
// transaction is being written and applies them together in the next one.
// A transaction costs an fsync and a copy of every page it touches,
// whatever it holds, so flushes every millisecond from several writers
// paid that cost each, one after another. A flush still returns only once
// the transaction holding its rows is durable. The flush that finds no
// transaction running writes one (it leads); when it is done it hands the
// lead to the oldest flush that queued meanwhile, so no goroutine lives
// beside the writers and no flush writes others' transactions forever.
type groupCommit struct {
	mu    sync.Mutex
	busy  bool
	queue []*flushReq
	txns  int // transactions written, for tests
}

// applyHook, when set (tests only), runs as a transaction starts, with
// the number of flushes it holds.
var applyHook func(flushes int)

// commit makes rows durable in the store, grouped with whatever other
// writers flush at the same time.
func (s *idempotentSink) commit(rows []upsert) error {
	g := &s.group
	req := &flushReq{rows: rows, done: make(chan flushResult, 1)}
	g.mu.Lock()
	g.queue = append(g.queue, req)
	if g.busy {
		g.mu.Unlock()
		if r := <-req.done; !r.lead {
			return r.err
		}
	} else {
		g.busy = true
		g.mu.Unlock()
	}
	// Leading: write everything queued, this flush's rows among them.
	g.mu.Lock()
	batch := g.queue
	g.queue = nil
	g.txns++
	g.mu.Unlock()
	if applyHook != nil {
		applyHook(len(batch))
	}
	err := s.apply(batch)
	for _, r := range batch {
		r.done <- flushResult{err: err}
	}
	g.mu.Lock()
	if len(g.queue) > 0 {
		next := g.queue[0]
		g.mu.Unlock()
		next.done <- flushResult{lead: true}
	} else {
		g.busy = false
		g.mu.Unlock()
	}
	return (<-req.done).err
}

// apply upserts the rows of every request in one bbolt transaction, which
// bbolt fsyncs before returning; a crash during it leaves none of them
// applied. Rows are sorted by key first, as bbolt writes ordered keys much
// faster; the sort is stable and keeps the requests in arrival order, so
// that among equal keys and versions the last written wins, as it would
// unsorted.
func (s *idempotentSink) apply(batch []*flushReq) error {
	var rows []upsert
	if len(batch) == 1 {
		rows = batch[0].rows
	} else {
		n := 0
		for _, r := range batch {
			n += len(r.rows)
		}
		rows = make([]upsert, 0, n)
		for _, r := range batch {
			rows = append(rows, r.rows...)
		}
	}
	slices.SortStableFunc(rows, func(a, b upsert) int { return bytes.Compare(a.k, b.k) })
	ncols := len(s.shape.cols)
	vo := 8 * s.shape.verIdx
	return s.update(func(tx *bolt.Tx) error {
		bk := tx.Bucket(bucketRows)
		added := int64(0)
		for _, r := range rows {
			old := bk.Get(r.k)
			if old == nil {
				added++
			} else {
				if err := s.checkRow(r.k, old, 8*ncols); err != nil {
					return err
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
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(count(tx)+added))
		return tx.Bucket(bucketMeta).Put(metaCount, n[:])
	})
}

type idempotentWriter struct {
	*writerBase
	s *idempotentSink
}

// Flush makes everything buffered durable in the store before it returns
// (see commit): after Flush the rows survive a crash.
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
	if err := w.s.commit(w.encode(chunks)); err != nil {
		return w.fail(fmt.Errorf("idempotent flush of subtask %d attempt %d into %s: %w", w.subtask, w.attempt, w.s.path, err))
	}
	return nil
}

// encode turns buffered columns into store rows. bbolt requires keys and
// values to stay untouched until the transaction ends, so each row gets
// its own bytes in one slab.
func (w *idempotentWriter) encode(chunks [][][]int64) []upsert {
	sh := w.sink.shape
	ncols := len(sh.cols)
	keyLen, valLen := 8*len(sh.keyIdx), 8*ncols+rowSumLen
	n := 0
	for _, c := range chunks {
		n += len(c[0])
	}
	slab := make([]byte, n*(keyLen+valLen))
	rows := make([]upsert, 0, n)
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
			binary.BigEndian.PutUint32(v[8*ncols:], rowSum(k, v[:8*ncols]))
			rows = append(rows, upsert{k, v})
		}
	}
	return rows
}

func (w *idempotentWriter) Close() error { return w.close() }
