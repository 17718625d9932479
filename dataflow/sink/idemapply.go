package sink

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

// idemPendingBytes bounds the acknowledged rows waiting for the applier:
// past it a flush waits, so memory does not grow with a store that falls
// behind. A variable so tests can make the applier the bottleneck.
var idemPendingBytes = 64 << 20

// applyEvery spaces the applier's runs: each costs three fsyncs (run,
// manifest, directory) and adds a run the merger must combine, and rows
// folded for longer hold each changed key once (idemfold.go), so they
// make fewer runs with fewer rows to sort, write and merge again (their
// lag costs no flush anything: the rows are durable in the log). A
// backlog of a quarter of the budget, a drain (Finish) or a full budget
// starts one at once.
var applyEvery = time.Second

// applyHook, when set (tests only), runs as the applier starts a
// transaction, with the number of frames it holds.
var applyHook func(frames int)

// applier moves acknowledged frames from memory into the store's runs. The
// frames are in the log already; these copies only spare reading it back.
type applier struct {
	mu      sync.Mutex
	cond    *sync.Cond
	pending []logChunk
	bytes   int
	busy    bool  // frames are folded and not yet written, or being written
	applied int64 // the last frame durable in the store
	err     error // the store failed: every later flush fails

	kick   chan struct{} // pending became non-empty
	urgent chan struct{} // do not wait for applyEvery
	stop   chan struct{}
	done   chan struct{}
}

func (a *applier) init(applied int64) {
	a.cond = sync.NewCond(&a.mu)
	a.applied = applied
	a.kick, a.urgent = make(chan struct{}, 1), make(chan struct{}, 1)
	a.stop, a.done = make(chan struct{}), make(chan struct{})
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// add hands an acknowledged frame to the applier.
func (a *applier) add(c logChunk) {
	a.mu.Lock()
	a.pending = append(a.pending, c)
	a.bytes += len(c.rows)
	full := a.bytes >= idemPendingBytes/4
	a.mu.Unlock()
	signal(a.kick)
	if full {
		signal(a.urgent)
	}
}

// waitRoom blocks while the pending frames fill the budget.
func (a *applier) waitRoom() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for a.bytes >= idemPendingBytes && a.err == nil {
		signal(a.urgent)
		a.cond.Wait()
	}
	return a.err
}

// drain returns once every frame handed over is in the store.
func (a *applier) drain() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	for (len(a.pending) > 0 || a.busy) && a.err == nil {
		signal(a.urgent)
		a.cond.Wait()
	}
	return a.err
}

func (a *applier) appliedSeq() int64 {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.applied
}

// fail marks the store failed (the merger's error): every later flush fails.
func (a *applier) fail(err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.err == nil {
		a.err = err
	}
	a.cond.Broadcast()
}

func (a *applier) failed() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}

// halt stops the applier after the transaction it is writing, if any;
// frames not applied stay in the log for the next open.
func (a *applier) halt() {
	select {
	case <-a.stop:
	default:
		close(a.stop)
	}
	<-a.done
}

func (s *idempotentSink) runApplier() {
	a := &s.ap
	defer close(a.done)
	f := s.newFold()
	last := time.Now()
	for {
		// Folded rows wait for applyEvery, a backlog (urgent) or a drain;
		// every frame that arrives meanwhile is folded at once.
		var due <-chan time.Time
		var t *time.Timer
		if !f.empty() {
			t = time.NewTimer(max(applyEvery-time.Since(last), 0))
			due = t.C
		}
		now := false
		select {
		case <-a.kick:
		case <-a.urgent:
			now = true
		case <-due:
			now = true
		case <-a.stop:
			if t != nil {
				t.Stop()
			}
			return
		}
		if t != nil {
			t.Stop()
		}
		a.mu.Lock()
		// A run holds at most a quarter of the budget, so the fold's map
		// stays bounded however far the applier fell behind.
		n, size := 0, f.bytes
		for n < len(a.pending) && (size == 0 || size+len(a.pending[n].rows) <= idemPendingBytes/4) {
			size += len(a.pending[n].rows)
			n++
		}
		batch := a.pending[:n:n]
		a.pending = a.pending[n:]
		more := len(a.pending) > 0
		a.busy = a.busy || n > 0
		a.mu.Unlock()
		for _, c := range batch {
			f.add(c)
		}
		if f.empty() || !now && !more && f.bytes < idemPendingBytes/4 && time.Since(last) < applyEvery {
			continue
		}
		last = time.Now()
		seq := f.lastSeq()
		err := s.writeFold(f)
		if err == nil {
			err = s.dropOldLog(seq)
		}
		a.mu.Lock()
		a.bytes -= f.bytes
		a.busy = false
		if err != nil && a.err == nil {
			a.err = err
		}
		if err == nil {
			a.applied = seq
		}
		a.cond.Broadcast()
		a.mu.Unlock()
		f.reset()
		if err != nil {
			return
		}
		if more {
			signal(a.kick) // the rest of the backlog
		}
	}
}

// dropOldLog removes idemLogOld once the store holds its last frame.
func (s *idempotentSink) dropOldLog(applied int64) error {
	s.lmu.Lock()
	defer s.lmu.Unlock()
	if s.log.oldLast == 0 || s.log.oldLast > applied {
		return nil
	}
	if err := removeIfExists(s.log.path(idemLogOld)); err != nil {
		return err
	}
	if err := syncDir(s.dir); err != nil {
		return err
	}
	s.log.oldLast = 0
	return nil
}

// applyChunks writes the rows of frames (in log order) as one new run
// (writeFold).
func (s *idempotentSink) applyChunks(chunks []logChunk) error {
	f := s.newFold()
	for _, c := range chunks {
		f.add(c)
	}
	return s.writeFold(f)
}

func (s *idempotentSink) newFold() *fold {
	return newFold(s.st.keyLen, s.st.rowLen, s.st.verOff)
}

// writeFold writes the rows f folded as one new run, durable with the
// manifest that names it and the last frame's number: a crash leaves all
// or none applied. Of the rows of one key only the winner is written
// (fold); rows of older runs are compared when runs are merged or read.
func (s *idempotentSink) writeFold(f *fold) error {
	if applyHook != nil {
		applyHook(len(f.frames))
	}
	return s.storeErr(s.st.add(f.each, f.lastSeq()))
}

// replayLog applies what the log holds beyond the store's last frame,
// then starts an empty log after it. Damage is an error naming the file;
// a torn tail of the newest file (never acknowledged) is dropped; a gap
// between the store and the log is an error. Frames the log lost at its
// end cannot be told from frames never written: Attach compares with the
// run's record of what was acknowledged.
func (s *idempotentSink) replayLog() error {
	applied := s.st.applied()
	rowLen := 8*len(s.shape.keyIdx) + 8*len(s.shape.cols) + rowSumLen
	s.log.dir, s.log.id = s.dir, s.id
	oldPath, curPath := s.log.path(idemLogOld), s.log.path(IdempotentLog)
	_, curErr := os.Stat(curPath)
	for _, name := range []string{idemLogOld, IdempotentLog} {
		p := s.log.path(name)
		last := name == IdempotentLog || curErr != nil
		chunks, first, present, err := readIdemLog(p, s.path, s.id, rowLen, last)
		if err != nil {
			return s.logDamage(p, err)
		}
		if !present {
			continue
		}
		if first > applied+1 {
			return s.logDamage(p, fmt.Errorf("its frames start at number %d, but the store %s holds frames through %d only: frames between are missing (was %s deleted?)", first, s.path, applied, oldPath))
		}
		var todo []logChunk
		for _, c := range chunks {
			if c.seq > applied {
				todo = append(todo, c)
			}
		}
		if len(todo) > 0 {
			if err := s.applyChunks(todo); err != nil {
				return err
			}
			applied = todo[len(todo)-1].seq
		}
	}
	// Everything is in the store: both files can go, oldest first.
	for _, p := range []string{oldPath, curPath} {
		if err := removeIfExists(p); err != nil {
			return err
		}
	}
	s.log.next = applied + 1
	if err := s.log.create(); err != nil {
		return fmt.Errorf("creating %s: %w", curPath, err)
	}
	s.ap.init(applied)
	s.acked.Store(applied)
	return nil
}

// logDamage reports a damaged log file as a damaged store, so that
// nothing is written to either again.
func (s *idempotentSink) logDamage(path string, err error) error {
	s.dmu.Lock()
	defer s.dmu.Unlock()
	if s.damaged == nil {
		s.damaged = fmt.Errorf("%w log %s: %s; rerun without --resume into a fresh output directory (or with --overwrite)", errDamagedStore, path, strings.Join(strings.Fields(err.Error()), " "))
	}
	return s.damaged
}
