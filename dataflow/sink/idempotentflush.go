package sink

import (
	"encoding/binary"
	"fmt"
	"sync"
)

// flushReq is one writer's flush waiting for the log append that covers
// it: frame is its rows with room for a frame header in front.
type flushReq struct {
	frame []byte
	done  chan flushResult
}

// flushResult tells a waiting flush how its append ended, or that it is
// to write the next append itself.
type flushResult struct {
	err  error
	lead bool
}

// groupCommit gathers the flushes of every writer that arrive while the
// log is being appended to and fsynced, and writes them as one frame in
// the next append: the fsync is the cost, whatever the frame holds. A
// flush still returns only once the frame holding its rows is durable.
// The flush that finds no append running writes one (it leads); when it
// is done it hands the lead to the oldest flush that queued meanwhile, so
// no goroutine lives beside the writers and no flush writes others'
// appends forever.
type groupCommit struct {
	mu    sync.Mutex
	busy  bool
	queue []*flushReq
	txns  int // appends written, for tests
}

// appendHook, when set (tests only), runs as an append starts, with the
// number of flushes it holds.
var appendHook func(flushes int)

// commit makes a flush's rows durable in the log, grouped with whatever
// other writers flush at the same time.
func (s *idempotentSink) commit(frame []byte) error {
	g := &s.group
	req := &flushReq{frame: frame, done: make(chan flushResult, 1)}
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
	// Leading: a full applier holds every writer here, so memory stays
	// bounded; what queues meanwhile joins this append.
	err := s.ap.waitRoom()
	g.mu.Lock()
	batch := g.queue
	g.queue = nil
	g.txns++
	g.mu.Unlock()
	if err == nil {
		if appendHook != nil {
			appendHook(len(batch))
		}
		err = s.appendFrame(batch)
	}
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

// appendFrame writes the rows of every request as one log frame, then
// hands them to the applier.
func (s *idempotentSink) appendFrame(batch []*flushReq) error {
	if err := s.isDamaged(); err != nil {
		return err // damaged: nothing is acknowledged any more
	}
	if err := s.ap.failed(); err != nil {
		return err
	}
	frame := batch[0].frame
	if len(batch) > 1 {
		n := idemFrameHdrLen
		for _, r := range batch {
			n += len(r.frame) - idemFrameHdrLen
		}
		frame = make([]byte, idemFrameHdrLen, n)
		for _, r := range batch {
			frame = append(frame, r.frame[idemFrameHdrLen:]...)
		}
	}
	s.lmu.Lock()
	if s.log.f == nil && s.log.broken == nil {
		s.log.broken = fmt.Errorf("%s is closed", s.log.path(IdempotentLog))
	}
	if s.log.size >= idemSegmentBytes && s.log.size > idemLogHeaderLen && s.log.oldLast == 0 && s.log.broken == nil {
		last := s.log.next - 1
		if err := s.log.rotate(); err != nil {
			s.log.broken = fmt.Errorf("rotating %s: %w", s.log.path(IdempotentLog), err)
		} else {
			s.log.oldLast = last
		}
	}
	seq, err := s.log.append(frame)
	s.lmu.Unlock()
	if err != nil {
		return err
	}
	s.acked.Store(seq)
	s.ap.add(logChunk{seq: seq, rows: frame[idemFrameHdrLen:]})
	return nil
}

type idempotentWriter struct {
	*writerBase
	s *idempotentSink
}

// Flush makes everything buffered durable in the store's log before it
// returns (see commit): after Flush the rows survive a crash.
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

// encode turns buffered columns into store rows (key, columns, checksum)
// in one slab behind room for a log frame's header. The slab is the
// frame's payload and, until the applier has written them to a run, the
// applier's rows: it is never written to again.
func (w *idempotentWriter) encode(chunks [][][]int64) []byte {
	sh := w.sink.shape
	ncols := len(sh.cols)
	keyLen, valLen := 8*len(sh.keyIdx), 8*ncols+rowSumLen
	n := 0
	for _, c := range chunks {
		n += len(c[0])
	}
	frame := make([]byte, idemFrameHdrLen+n*(keyLen+valLen))
	slab := frame[idemFrameHdrLen:]
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
		}
	}
	return frame
}

func (w *idempotentWriter) Close() error { return w.close() }
