package sink

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// appendSink publishes flushed rows as visible files: every flush its own
// file, or, with a roll policy, an in-progress file per writer rolled by
// age and size (roll.go). It never deduplicates: a replay after a crash
// shows up as duplicate rows, which Resolve counts.
type appendSink struct {
	*base

	seqMu sync.Mutex
	// nextSeq numbers the files of each (subtask, attempt), so a second
	// Writer for the same pair continues the sequence instead of colliding.
	nextSeq map[[2]int]int

	rollMu  sync.Mutex
	roll    RollPolicy
	writers map[*appendWriter]struct{} // open writers, for the age check
	ticking bool
	// rolling admits one background roll at a time (appendroll.go).
	rolling chan struct{}
	// inProgressDurable: this process synced the output directory after
	// InProgressDir was there (createInProgress).
	inProgressDurable atomic.Bool
	// rollWaiters counts those waiting for a background roll: while any
	// wait, no roll rests (trickle).
	rollWaiters atomic.Int32

	aj appendJournal
}

func newAppendSink(b *base) *appendSink {
	return &appendSink{base: b, nextSeq: map[[2]int]int{}, writers: map[*appendWriter]struct{}{}, rolling: make(chan struct{}, 1)}
}

func (s *appendSink) Mode() Mode { return Append }

func (s *appendSink) Writer(subtask, attempt int) (Writer, error) {
	wb, err := s.newWriterBase(subtask, attempt)
	if err != nil {
		return nil, err
	}
	w := &appendWriter{writerBase: wb, s: s}
	s.rollMu.Lock()
	s.writers[w] = struct{}{}
	s.rollMu.Unlock()
	return w, nil
}

func (s *appendSink) policy() RollPolicy {
	s.rollMu.Lock()
	defer s.rollMu.Unlock()
	return s.roll
}

// Close drops the unflushed rows of every writer still open. In-progress
// files stay as they are: their rows are durable, and a resumed run
// publishes what a recovery point covers.
func (s *appendSink) Close() error {
	s.closeWriters()
	s.rollMu.Lock()
	ws := s.liveWriters()
	s.writers = map[*appendWriter]struct{}{}
	s.rollMu.Unlock()
	for _, w := range ws {
		w.mu.Lock()
		w.waitSealedLocked()
		w.closeInProgress()
		w.mu.Unlock()
	}
	s.aj.removing.Wait()
	return nil
}

func (s *appendSink) seq(subtask, attempt int) int {
	s.seqMu.Lock()
	defer s.seqMu.Unlock()
	k := [2]int{subtask, attempt}
	n := s.nextSeq[k]
	s.nextSeq[k] = n + 1
	return n
}

type appendWriter struct {
	*writerBase
	s *appendSink
	// files is what this writer's flushes published, for Receipt.
	files []appendFile
	// cur is the open in-progress file, with a roll policy.
	cur *inProgress
	// sealed is the previous one while a background roll rewrites it;
	// sealDone is closed when that roll ends.
	sealed   *inProgress
	sealDone chan struct{}
	// tail is cur's size, for a background roll's pace (sealLocked).
	tail atomic.Int64
}

// Flush makes everything buffered durable (see FlushVisible).
func (w *appendWriter) Flush(epoch int64) error { return w.FlushVisible(epoch, nil) }

// FlushVisible makes everything buffered, whatever its epoch, durable.
// Without a roll policy it publishes it as one new visible file; with one
// it appends it to the writer's in-progress file, whose rows readers see
// as its tail, and rolls that file when it is due. A flush with nothing
// buffered publishes nothing, but may roll.
func (w *appendWriter) FlushVisible(epoch int64, visible func(time.Time)) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.check(); err != nil {
		return err
	}
	p := w.s.policy()
	chunks, release, ok := w.takeAll()
	if !p.rolls() {
		if ok {
			defer release()
			if err := w.publish(chunks, epoch, ""); err != nil {
				return err
			}
		}
		if visible != nil {
			visible(time.Now())
		}
		return nil
	}
	if ok {
		err := w.appendInProgress(chunks, epoch)
		release()
		if err != nil {
			return w.fail(fmt.Errorf("append flush of subtask %d attempt %d: %w", w.subtask, w.attempt, err))
		}
	}
	// The tail is part of the output (tail.go): flushed rows are
	// visible as soon as they are durable.
	if visible != nil {
		visible(time.Now())
	}
	if w.cur != nil && w.cur.due(p, time.Now()) {
		w.sealLocked()
	}
	return nil
}

// publish writes chunks as one new visible file: written hidden, synced,
// then linked under its final name (which never replaces an existing
// file) and the directory synced. from names the in-progress file the
// rows come from, if any.
func (w *appendWriter) publish(chunks [][][]int64, epoch int64, from string) error {
	f, err := w.s.publishChunks(chunks, w.subtask, w.attempt, w.s.seq(w.subtask, w.attempt), true)
	if err != nil {
		return w.fail(fmt.Errorf("append flush of subtask %d attempt %d: %w", w.subtask, w.attempt, err))
	}
	f.epoch, f.From = epoch, from
	w.files = append(w.files, f)
	w.s.flushed(f)
	return nil
}

// publishChunks publishes chunks under part-s<subtask>-a<attempt>-<seq>,
// or the next free seq when an earlier process took that name. A fresh
// file (not a tail's roll) also passes over the names of tails an earlier
// process left: published under one, it would hide that tail's rows from
// readers (tail.go).
func (s *appendSink) publishChunks(chunks [][][]int64, subtask, attempt, seq int, fresh bool) (appendFile, error) {
	return s.publishEach(func(write chunkFunc) error {
		for _, c := range chunks {
			if err := write(c); err != nil {
				return err
			}
		}
		return nil
	}, subtask, attempt, seq, fresh, nil)
}

// publishEach is publishChunks for rows handed over one chunk at a time by
// each (a roll streams its tail through it, so it holds one segment, not
// the file); a chunk is encoded before each hands over the next. With a
// trickle (a background roll's) the file is paced as writeTemp says.
func (s *appendSink) publishEach(each func(write chunkFunc) error, subtask, attempt, seq int, fresh bool, tr *trickle) (appendFile, error) {
	dir := s.dir
	ext := extOf(s.format)
	// The checksum is taken as the file is written, for the journal.
	h := crc32.New(castagnoli)
	var rows int64
	tmp, size, err := writeTemp(dir, fmt.Sprintf("part-s%d-a%d", subtask, attempt), tr, func(out io.Writer) error {
		enc, err := newEncoder(s.format, io.MultiWriter(out, h), s.shape)
		if err != nil {
			return err
		}
		if err := each(func(c [][]int64) error {
			if len(c) > 0 {
				rows += int64(len(c[0]))
			}
			return enc.write(c)
		}); err != nil {
			return err
		}
		return enc.close()
	})
	if err != nil {
		return appendFile{}, err
	}
	// A name can be taken only by an earlier process that used the same
	// subtask and attempt numbers; skip past it rather than overwrite.
	var name string
	for tries := 0; ; tries++ {
		name = fmt.Sprintf("part-s%d-a%d-%06d%s", subtask, attempt, seq, ext)
		if _, terr := os.Lstat(filepath.Join(dir, InProgressDir, name)); (fresh || tries > 0) && terr == nil && tries < 1_000_000 {
			seq = s.seq(subtask, attempt)
			continue
		}
		_, err = linkNoReplace(tmp, filepath.Join(dir, name))
		if err == nil || !errors.Is(err, errTargetExists) || tries > 1_000_000 {
			break
		}
		seq = s.seq(subtask, attempt)
	}
	if err != nil {
		_ = removeIfExists(tmp)
		return appendFile{}, err
	}
	if err := syncDir(dir); err != nil {
		return appendFile{}, err
	}
	// Only now drop the temporary name: removed earlier, a crash could
	// persist the removal but not the link.
	if err := removeIfExists(tmp); err != nil {
		return appendFile{}, err
	}
	return appendFile{File: name, Rows: rows, Size: size, CRC32C: h.Sum32()}, nil
}

// Close publishes what the writer's in-progress file holds (flushed rows
// are durable and acknowledged; a dead worker's flushed rows are on disk
// too) and drops the unflushed rest.
func (w *appendWriter) Close() error {
	w.mu.Lock()
	var err error
	if w.cur != nil && !w.closed && w.err == nil {
		err = w.rollLocked()
	}
	w.waitSealedLocked()
	w.closeInProgress()
	// Closed under the same lock as the roll: a Write a throttle held
	// back finds the writer closed when it wakes.
	w.closed = true
	w.dropLocked()
	w.mu.Unlock()
	w.s.rollMu.Lock()
	delete(w.s.writers, w)
	w.s.rollMu.Unlock()
	if cerr := w.close(); err == nil {
		err = cerr
	}
	return err
}

// finishAll turns buffers into column chunks, releasing them when done.
func finishAll(bufs []*rowBuf) (chunks [][][]int64, release func()) {
	rels := make([]func(), len(bufs))
	for i, rb := range bufs {
		var c [][]int64
		c, rels[i] = rb.finish()
		chunks = append(chunks, c)
	}
	return chunks, func() {
		for _, r := range rels {
			r()
		}
	}
}
