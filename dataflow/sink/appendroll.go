package sink

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"
)

// The append writer's side of rolling (see roll.go): what a flush appends
// to the in-progress file, when the file rolls, and what a resumed run does
// with in-progress files an earlier process left.

// setRoll sets the policy and, for a rolling one, starts the age check: a
// writer that stops flushing (an idle input) still rolls within about
// Age/4 of its file falling due.
func (s *appendSink) setRoll(p RollPolicy) {
	s.rollMu.Lock()
	defer s.rollMu.Unlock()
	s.roll = p
	if !p.rolls() || s.ticking {
		return
	}
	s.ticking = true
	go s.ageCheck()
}

func (s *appendSink) ageCheck() {
	for {
		p := s.policy()
		every := max(p.Age/4, time.Millisecond)
		if !p.rolls() {
			every = 100 * time.Millisecond
		}
		t := time.NewTimer(every)
		select {
		case <-s.done:
			t.Stop()
			return
		case now := <-t.C:
			s.rollMu.Lock()
			ws := s.liveWriters()
			s.rollMu.Unlock()
			for _, w := range ws {
				w.mu.Lock()
				if w.cur != nil && !w.closed && w.err == nil && w.cur.due(p, now) {
					w.sealLocked()
				}
				w.mu.Unlock()
			}
		}
	}
}

// liveWriters lists the open writers; rollMu held.
func (s *appendSink) liveWriters() []*appendWriter {
	ws := make([]*appendWriter, 0, len(s.writers))
	for w := range s.writers {
		ws = append(ws, w)
	}
	return ws
}

// appendInProgress appends chunks to the in-progress file as one segment,
// opening a new file first when there is none, and rolling the open one
// first when epoch is older than its newest (so that a record's prefix of
// a file holds exactly its flushes of epochs <= the record's). w.mu held.
func (w *appendWriter) appendInProgress(chunks [][][]int64, epoch int64) error {
	if w.cur != nil && epoch < w.cur.epoch {
		if err := w.rollLocked(); err != nil {
			return err
		}
	}
	ext := extOf(w.sink.format)
	for tries := 0; w.cur == nil; tries++ {
		name := fmt.Sprintf("part-s%d-a%d-%06d%s", w.subtask, w.attempt, w.s.seq(w.subtask, w.attempt), ext)
		if _, err := os.Lstat(filepath.Join(w.sink.dir, name)); err == nil && tries < 1_000_000 {
			continue // an earlier process published it
		}
		ip, ok, err := createInProgress(w.sink.dir, name, w.s.inProgressDurable.Load())
		if err != nil {
			return err
		}
		if ok {
			w.s.inProgressDurable.Store(true)
			w.cur = ip
		} else if tries > 1_000_000 {
			return fmt.Errorf("no free in-progress name for subtask %d attempt %d", w.subtask, w.attempt)
		}
	}
	seg, rows := encodeSegment(len(w.sink.shape.cols), chunks)
	if err := w.cur.append(seg, rows, epoch, time.Now()); err != nil {
		return err
	}
	w.tail.Store(w.cur.bytes)
	w.s.inProgressFlushed(inProgressEntry{File: w.cur.name, Bytes: w.cur.bytes, Rows: w.cur.rows, CRC32C: w.cur.crc, epoch: epoch})
	return nil
}

// rollLocked publishes the in-progress file's rows as one visible file,
// under the name the in-progress file reserved (or the next free one):
// from then on readers read that file instead of the tail (tail.go). The
// in-progress file is removed once a durable recovery point lists the
// visible one (appendJournal.commitRolled), at once without a journal.
// A background roll of the writer's previous file is waited for first, so
// its visible file is there when this returns. w.mu held.
func (w *appendWriter) rollLocked() error {
	w.waitSealedLocked()
	if err := w.check(); err != nil {
		return err
	}
	ip := w.cur
	if ip == nil {
		return nil
	}
	f, err := w.rewrite(ip, nil)
	if err != nil {
		return w.fail(err)
	}
	w.closeInProgress()
	w.rolled(ip, f)
	return nil
}

// rewrite writes the rows of the in-progress file ip as its visible file.
// It touches nothing of the writer but its sink: a background roll runs
// it without w.mu, and trickles its file to the device (tr, writeTemp).
//
// It streams in one pass: the segments are decoded one at a time into the
// encoder while the prefix's checksum is taken, and a prefix that is short
// or differs from its record fails the roll before the file is published.
// A roll so holds a segment, not the file twice over (read, then decoded),
// which several writers rolling at once made the run's peak memory.
func (w *appendWriter) rewrite(ip *inProgress, tr *trickle) (appendFile, error) {
	path := filepath.Join(w.sink.dir, ip.name)
	seq, err := seqOf(ip.name)
	if err != nil {
		return appendFile{}, err
	}
	f, err := w.s.publishEach(func(write chunkFunc) error {
		file, err := os.Open(path)
		if err != nil {
			return err
		}
		defer file.Close()
		h := crc32.New(castagnoli)
		used, _, err := eachSegment(io.TeeReader(io.LimitReader(file, ip.bytes), h), ip.bytes, len(w.sink.shape.cols), yieldEach(write))
		switch {
		case err != nil:
			return err
		case used != ip.bytes:
			return errShortPrefix
		case h.Sum32() != ip.crc:
			return errPrefixCRC
		}
		return nil
	}, w.subtask, w.attempt, seq, false, tr)
	if err != nil {
		return appendFile{}, fmt.Errorf("rolling %s: %w", path, err)
	}
	f.epoch, f.From = ip.epoch, ip.name
	return f, nil
}

// yieldEach is each, giving other goroutines the processor after every
// call: a background job's long loop otherwise keeps a P until the
// scheduler preempts it, up to 10 ms later.
func yieldEach(each chunkFunc) chunkFunc {
	return func(c [][]int64) error {
		err := each(c)
		runtime.Gosched()
		return err
	}
}

// rolled notes the visible file f a roll of ip made. w.mu held.
func (w *appendWriter) rolled(ip *inProgress, f appendFile) {
	w.files = append(w.files, f)
	if !w.s.flushed(f) {
		_ = removeIfExists(filepath.Join(w.sink.dir, ip.name))
	}
}

// rollPace is the pace of w's background roll: it rests while w's next
// file holds less than a quarter of the roll size, that is while the roll
// is well ahead of the next one falling due.
func (w *appendWriter) rollPace() *trickle {
	return &trickle{waiting: &w.s.rollWaiters, ahead: func() bool {
		size := w.s.policy().Size
		return size <= 0 || w.tail.Load() < size/4
	}}
}

// sealLocked rolls the in-progress file in the background: its rows are
// visible already (the tail), so the flush that found it due need not
// wait while they are written again, and the next flush opens a new file.
// One background roll per writer at a time: while one runs, the open file
// keeps growing and rolls after it.
//
// A roll is CPU work (decoding the tail, encoding the data file: about
// 200 ms for 32 MiB), and the writers of a sink fill their files at the
// same rate, so they fall due together. The sink admits one background
// roll at a time, and a roll yields the processor after every segment
// (yieldEach): on two cores, two rolls at once took both, and the batch or
// flush that became runnable meanwhile waited for the scheduler to preempt
// one (up to 10 ms), which the latency's tail showed. w.mu held.
func (w *appendWriter) sealLocked() {
	if w.cur == nil || w.sealed != nil {
		return
	}
	ip, done := w.cur, make(chan struct{})
	w.cur, w.sealed, w.sealDone = nil, ip, done
	w.tail.Store(0)
	go func() {
		defer close(done)
		w.s.rolling <- struct{}{}
		defer func() { <-w.s.rolling }()
		_ = ip.f.Close()
		f, err := w.rewrite(ip, w.rollPace())
		w.mu.Lock()
		defer w.mu.Unlock()
		w.sealed = nil
		switch {
		case err != nil && w.err == nil:
			// The writer's next Flush says why.
			_ = w.fail(err)
		case err == nil:
			w.rolled(ip, f)
		}
	}()
}

// waitSealedLocked waits for the writer's background roll, if one runs;
// w.mu held, released while waiting.
func (w *appendWriter) waitSealedLocked() {
	if w.sealed != nil {
		// Every background roll of the sink stops resting meanwhile: this
		// one may be queued behind another's.
		w.s.rollWaiters.Add(1)
		defer w.s.rollWaiters.Add(-1)
	}
	for w.sealed != nil {
		done := w.sealDone
		w.mu.Unlock()
		<-done
		w.mu.Lock()
	}
}

// closeInProgress closes the in-progress file's handle and forgets it;
// the file stays. w.mu held.
func (w *appendWriter) closeInProgress() {
	if w.cur != nil {
		_ = w.cur.f.Close()
		w.cur = nil
	}
}

// seqOf is the sequence number in an in-progress or visible append name.
func seqOf(name string) (int, error) {
	base := strings.TrimSuffix(filepath.Base(name), filepath.Ext(name))
	i := strings.LastIndexByte(base, '-')
	var seq int
	if i < 0 {
		return 0, fmt.Errorf("append file name %s has no sequence number", name)
	}
	if _, err := fmt.Sscanf(base[i+1:], "%d", &seq); err != nil {
		return 0, fmt.Errorf("append file name %s has no sequence number", name)
	}
	return seq, nil
}

// subtaskAttemptOf reads s<S>-a<A> from an append name.
func subtaskAttemptOf(name string) (subtask, attempt int, err error) {
	if _, err := fmt.Sscanf(filepath.Base(name), "part-s%d-a%d-", &subtask, &attempt); err != nil {
		return 0, 0, fmt.Errorf("append file name %s names no subtask and attempt", name)
	}
	return subtask, attempt, nil
}

// Finish rolls every open writer's in-progress file, lists what is not
// on record yet in a record, and removes the in-progress files whose rows
// are now visible and on record. A bounded run's epochs are all covered by
// its last recovery point when the executor returns, so that record is
// one a resume reads.
func (s *appendSink) Finish() error {
	s.rollMu.Lock()
	ws := s.liveWriters()
	s.rollMu.Unlock()
	// With rolling by age and size alone, a bounded run's rows are mostly
	// still in tails at its end: the writers roll side by side, as many at
	// once as there are CPUs (each roll holds its file twice in memory).
	errs := make([]error, len(ws))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i, w := range ws {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			w.mu.Lock()
			defer w.mu.Unlock()
			w.waitSealedLocked()
			if w.cur != nil && !w.closed && w.err == nil {
				errs[i] = w.rollLocked()
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err // the first: an error is one line
		}
	}
	s.aj.mu.Lock()
	last := int64(-1)
	for _, f := range s.aj.pending {
		last = max(last, f.epoch)
	}
	for _, e := range s.aj.pendingIP {
		last = max(last, e.epoch)
	}
	s.aj.mu.Unlock()
	if last >= 0 {
		if err := s.Record(last); err != nil {
			return err
		}
	}
	if err := s.aj.commitRolled(s.dir, math.MaxInt64); err != nil {
		return err
	}
	// Gone once empty; a file still in it is one a resume needs.
	if os.Remove(filepath.Join(s.dir, InProgressDir)) == nil {
		s.inProgressDurable.Store(false) // a new one is a new entry
	}
	return nil
}

// recoverInProgress publishes the rows of an in-progress file an earlier
// process left as a visible file: its tail was part of the output, so its
// rows stay visible (those flushed after the recovery point come again,
// and are counted as duplicates). When a record says what its first
// e.Bytes hold (recorded), they are checked against it first, and a
// missing or damaged file is refused, naming it; when the file rolled
// after that record, only those bytes are published (the visible file
// the roll made, which no record lists, has the rest); else the rest is checked
// segment by segment, and an end cut short (a flush a kill interrupted,
// never acknowledged) is dropped. ok is false when the file holds no
// complete segment.
func (s *appendSink) recoverInProgress(e inProgressEntry, epoch int64, recorded bool) (f appendFile, ok bool, err error) {
	path := filepath.Join(s.dir, e.File)
	damaged := func(err error) error {
		if !recorded {
			return fmt.Errorf("in-progress append file %s is damaged: %v: %s", path, err, refuseHint)
		}
		return fmt.Errorf("in-progress append file %s of recovery point %d is damaged: %v (the run's record of its destination says its first %s): %s",
			path, epoch, err, e.holds(), refuseHint)
	}
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist) && recorded && rolledFile(s.dir, e.File):
		// Rolled after the record, then removed as its roll's visible
		// file shadowed it: by a resume from an older point (to which
		// this record was of a point never made durable) or a commit.
		// The visible file holds the rows the record names.
		return appendFile{}, false, nil
	case errors.Is(err, fs.ErrNotExist) && recorded:
		return appendFile{}, false, fmt.Errorf("in-progress append file %s of recovery point %d is missing (the run's record of its destination says its first %s): %s",
			path, epoch, e.holds(), refuseHint)
	case errors.Is(err, fs.ErrNotExist):
		return appendFile{}, false, nil // removed since it was listed
	case err != nil:
		return appendFile{}, false, fmt.Errorf("checking in-progress append file %s: %w", path, err)
	}
	var chunks [][][]int64
	if recorded {
		switch {
		case int64(len(data)) < e.Bytes:
			return appendFile{}, false, damaged(errShortPrefix)
		case crc32.Checksum(data[:e.Bytes], castagnoli) != e.CRC32C:
			return appendFile{}, false, damaged(errPrefixCRC)
		}
		var rows int64
		chunks, rows, err = decodeSegments(data[:e.Bytes], len(s.shape.cols))
		if err == nil && rows != e.Rows {
			err = fmt.Errorf("it holds %d rows", rows)
		}
		if err != nil {
			return appendFile{}, false, damaged(err)
		}
		data = data[e.Bytes:]
		// Rolled already (a kill before the next record): readers read
		// the visible file, which holds the rest; only the checked
		// prefix is published again.
		if rolledFile(s.dir, e.File) {
			data = nil
		}
	}
	if _, _, err := decodeTail(data, len(s.shape.cols), &chunks); err != nil {
		return appendFile{}, false, damaged(err)
	}
	if len(chunks) == 0 {
		return appendFile{}, false, nil
	}
	subtask, attempt, err := subtaskAttemptOf(e.File)
	if err != nil {
		return appendFile{}, false, err
	}
	seq, err := seqOf(e.File)
	if err != nil {
		return appendFile{}, false, err
	}
	f, err = s.publishChunks(chunks, subtask, attempt, seq, false)
	if err != nil {
		return appendFile{}, false, fmt.Errorf("publishing the rows of in-progress file %s: %w", path, err)
	}
	f.epoch, f.From = epoch, e.File
	return f, true, nil
}

// rolledFile says in-progress file name (relative to dir) has the visible
// file its roll makes.
func rolledFile(dir, name string) bool {
	_, err := os.Lstat(filepath.Join(dir, filepath.Base(name)))
	return err == nil
}

// leftTails lists the in-progress files in dir that keep does not name,
// split into those a visible file of their name shadows (rolled: readers
// no longer read them) and the others.
func leftTails(dir string, keep map[string]bool) (shadowed, live []string, err error) {
	idir := filepath.Join(dir, InProgressDir)
	entries, err := os.ReadDir(idir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("listing %s: %w", idir, err)
	}
	for _, e := range entries {
		rel := filepath.Join(InProgressDir, e.Name())
		if keep[rel] {
			continue
		}
		if rolledFile(dir, rel) || !inProgressNameRE.MatchString(rel) {
			shadowed = append(shadowed, rel)
		} else {
			live = append(live, rel)
		}
	}
	return shadowed, live, nil
}
