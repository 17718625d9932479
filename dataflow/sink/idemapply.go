package sink

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// idemPendingBytes bounds the acknowledged rows waiting for the applier:
// past it a flush waits, so memory does not grow with a store that falls
// behind. A variable so tests can make the applier the bottleneck.
var idemPendingBytes = 64 << 20

// applyEvery spaces the applier's runs: each costs three fsyncs (run,
// manifest, directory) and adds a run the merger must combine, so rows
// gathered for longer make fewer, larger runs (their lag costs no flush
// anything). A backlog of a quarter of the budget, a drain (Finish) or a
// full budget starts one at once.
var applyEvery = 100 * time.Millisecond

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
	busy    bool  // a transaction is being written
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
	last := time.Now()
	for {
		select {
		case <-a.kick:
		case <-a.stop:
			return
		}
		if d := applyEvery - time.Since(last); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-a.urgent:
			case <-a.stop:
				t.Stop()
				return
			}
			t.Stop()
		}
		a.mu.Lock()
		batch := a.pending
		a.pending = nil
		a.busy = len(batch) > 0
		a.mu.Unlock()
		if len(batch) == 0 {
			continue
		}
		last = time.Now()
		err := s.applyChunks(batch)
		if err == nil {
			err = s.dropOldLog(batch[len(batch)-1].seq)
		}
		a.mu.Lock()
		a.busy = false
		for _, c := range batch {
			a.bytes -= len(c.rows)
		}
		if err != nil && a.err == nil {
			a.err = err
		}
		if err == nil {
			a.applied = batch[len(batch)-1].seq
		}
		a.cond.Broadcast()
		a.mu.Unlock()
		if err != nil {
			return
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

// applyChunks writes the rows of frames (in log order) as one new run,
// durable with the manifest that names it and the last frame's number: a
// crash leaves all or none applied. Rows are sorted by key, and of the rows
// of one key only the winner is written: the greatest version, and among
// equal versions the last in log order (a replay writes the same row
// again), as writing them one after another would leave. Rows of older
// runs are compared when runs are merged or read.
func (s *idempotentSink) applyChunks(chunks []logChunk) error {
	if applyHook != nil {
		applyHook(len(chunks))
	}
	sh := s.shape
	keyLen := 8 * len(sh.keyIdx)
	colBytes := 8 * len(sh.cols)
	rowLen := keyLen + colBytes + rowSumLen
	// An entry is the key's first 16 bytes as two integers (most keys are
	// one or two columns; longer ones compare their rest as bytes) and the
	// row's place: frame in the high 24 bits, row in the low 40, so
	// ordering by place is log order.
	type entry struct{ k0, k1, at uint64 }
	n := 0
	for _, c := range chunks {
		n += len(c.rows) / rowLen
	}
	idx := make([]entry, 0, n)
	for ci, c := range chunks {
		for r := range len(c.rows) / rowLen {
			e := entry{k0: binary.BigEndian.Uint64(c.rows[r*rowLen:]), at: uint64(ci)<<40 | uint64(r)}
			if keyLen > 8 {
				e.k1 = binary.BigEndian.Uint64(c.rows[r*rowLen+8:])
			}
			idx = append(idx, e)
		}
	}
	row := func(at uint64) []byte {
		o := int(at&(1<<40-1)) * rowLen
		return chunks[at>>40].rows[o : o+rowLen : o+rowLen]
	}
	sameKey := func(a, b entry) bool {
		return a.k0 == b.k0 && a.k1 == b.k1 && (keyLen <= 16 || bytes.Equal(row(a.at)[16:keyLen], row(b.at)[16:keyLen]))
	}
	slices.SortFunc(idx, func(a, b entry) int {
		if a.k0 != b.k0 {
			return cmp.Compare(a.k0, b.k0)
		}
		if a.k1 != b.k1 {
			return cmp.Compare(a.k1, b.k1)
		}
		if keyLen > 16 {
			if c := bytes.Compare(row(a.at)[16:keyLen], row(b.at)[16:keyLen]); c != 0 {
				return c
			}
		}
		return cmp.Compare(a.at, b.at)
	})
	vo := 8 * sh.verIdx
	ver := func(v []byte) int64 { return int64(binary.BigEndian.Uint64(v[vo:])) }
	lastSeq := chunks[len(chunks)-1].seq
	err := s.st.add(func(emit func([]byte) error) error {
		for i := 0; i < len(idx); {
			best := row(idx[i].at)
			j := i + 1
			for ; j < len(idx) && sameKey(idx[j], idx[i]); j++ {
				r := row(idx[j].at)
				if ver(r[keyLen:]) >= ver(best[keyLen:]) {
					best = r
				}
			}
			i = j
			if err := emit(best); err != nil {
				return err
			}
		}
		return nil
	}, lastSeq)
	return s.storeErr(err)
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
