package sink

import (
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"path/filepath"
	"sync"
)

// appendSink publishes every flush as a new visible file. It never
// deduplicates: a replay after a crash shows up as duplicate rows, which
// Resolve counts.
type appendSink struct {
	*base

	seqMu sync.Mutex
	// nextSeq numbers the files of each (subtask, attempt), so a second
	// Writer for the same pair continues the sequence instead of colliding.
	nextSeq map[[2]int]int

	aj appendJournal
}

func newAppendSink(b *base) *appendSink {
	return &appendSink{base: b, nextSeq: map[[2]int]int{}}
}

func (s *appendSink) Mode() Mode { return Append }

func (s *appendSink) Writer(subtask, attempt int) (Writer, error) {
	wb, err := s.newWriterBase(subtask, attempt)
	if err != nil {
		return nil, err
	}
	return &appendWriter{writerBase: wb, s: s}, nil
}

func (s *appendSink) Finish() error { return nil }

// Close drops the unflushed rows of every writer still open.
func (s *appendSink) Close() error {
	s.closeWriters()
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
}

// Flush publishes everything buffered, whatever its epoch, as one new
// visible file: written hidden, synced, then linked under its final name
// (which never replaces an existing file) and the directory synced. A flush
// with nothing buffered publishes nothing.
func (w *appendWriter) Flush(epoch int64) error {
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
	dir := w.sink.dir
	ext := extOf(w.sink.format)
	// The checksum is taken as the file is written, for the journal.
	h := crc32.New(castagnoli)
	enc := encodeFile(w.sink.format, w.sink.shape, chunks)
	tmp, size, err := writeTemp(dir, fmt.Sprintf("part-s%d-a%d", w.subtask, w.attempt), func(out io.Writer) error {
		return enc(io.MultiWriter(out, h))
	})
	if err != nil {
		return w.fail(fmt.Errorf("append flush of subtask %d attempt %d: %w", w.subtask, w.attempt, err))
	}
	// A name can be taken only by an earlier process that used the same
	// subtask and attempt numbers; skip past it rather than overwrite.
	var name string
	for tries := 0; ; tries++ {
		name = fmt.Sprintf("part-s%d-a%d-%06d%s", w.subtask, w.attempt, w.s.seq(w.subtask, w.attempt), ext)
		_, err = linkNoReplace(tmp, filepath.Join(dir, name))
		if err == nil || !errors.Is(err, errTargetExists) || tries > 1_000_000 {
			break
		}
	}
	if err != nil {
		_ = removeIfExists(tmp)
		return w.fail(fmt.Errorf("append flush of subtask %d attempt %d: %w", w.subtask, w.attempt, err))
	}
	if err := syncDir(dir); err != nil {
		return w.fail(fmt.Errorf("append flush of subtask %d attempt %d: %w", w.subtask, w.attempt, err))
	}
	// Only now drop the temporary name: removed earlier, a crash could
	// persist the removal but not the link.
	if err := removeIfExists(tmp); err != nil {
		return w.fail(fmt.Errorf("append flush of subtask %d attempt %d: %w", w.subtask, w.attempt, err))
	}
	var rows int64
	for _, c := range chunks {
		if len(c) > 0 {
			rows += int64(len(c[0]))
		}
	}
	f := appendFile{File: name, Rows: rows, Size: size, CRC32C: h.Sum32(), epoch: epoch}
	w.files = append(w.files, f)
	w.s.flushed(f)
	return nil
}

func (w *appendWriter) Close() error { return w.close() }

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
