package sink

import (
	"cmp"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// StagingDir is the transactional sink's directory of pre-committed files
// inside the output directory. The leading underscore keeps it invisible.
const StagingDir = "_staging"

// txnSink is the two-phase sink: Flush pre-commits an epoch's rows to a
// durable but invisible staged file, Commit publishes staged files once the
// recovery point or batch covering their epoch is complete. Staged files
// are found by listing the staging directory, not from memory, so a new
// process can commit or discard what a crashed one staged.
type txnSink struct {
	*base
	staging string

	// commitMu serialises Commit and Recover: both move the same files.
	commitMu sync.Mutex
	// hook, when set (by tests), runs before each step of a commit and can
	// fail it, simulating a crash between any two steps.
	hook func(step, name string) error

	partMu   sync.Mutex
	nextPart map[stageKey]int

	// journal, once attached, records every staged file in durable
	// storage, and what is published is checked against it (txnjournal.go).
	journal   *Journal
	entMu     sync.Mutex
	entries   map[string]stagedEntry         // by staged name
	byVisible map[string]map[string]struct{} // staged names by visible name
	// checked: the published files have been compared with the journal
	// once in this process (the first Recover after Attach).
	checked bool
}

// stageKey identifies what one staged file holds: one epoch of one writer.
type stageKey struct {
	epoch   int64
	subtask int
	attempt int
}

// stagedFile is a parsed staged file name. part tells apart several files
// of one key (an epoch flushed twice by one writer).
type stagedFile struct {
	stageKey
	part int
	name string // base name in the staging directory
}

// visibleName is the name a staged file is published under. It leaves the
// attempt out on purpose: when an executor re-delivers an epoch after a
// crash (a micro-batch re-run from its logged offsets produces the same rows
// for the same subtask), the new attempt's file replaces the one an earlier
// attempt may already have published, instead of appearing beside it. That
// is what makes re-delivery of the same epoch add no duplicates.
func (f stagedFile) visibleName() string {
	return fmt.Sprintf("part-e%d-s%d-p%d%s", f.epoch, f.subtask, f.part, filepath.Ext(f.name))
}

func stagedName(k stageKey, part int, format Format) string {
	return fmt.Sprintf("e%d-s%d-a%d-p%d%s", k.epoch, k.subtask, k.attempt, part, extOf(format))
}

// parseStaged parses e<epoch>-s<subtask>-a<attempt>-p<part>.<ext>. Only the
// canonical spelling is accepted, so a name maps to exactly one key.
func parseStaged(name string) (stagedFile, bool) {
	format, ok := formatOfName(name)
	if !ok {
		return stagedFile{}, false
	}
	stem := name[:len(name)-len(filepath.Ext(name))]
	fields := strings.Split(stem, "-")
	if len(fields) != 4 {
		return stagedFile{}, false
	}
	var v [4]int64
	for i, p := range []byte{'e', 's', 'a', 'p'} {
		if len(fields[i]) < 2 || fields[i][0] != p {
			return stagedFile{}, false
		}
		n, err := strconv.ParseInt(fields[i][1:], 10, 64)
		if err != nil || n < 0 || (i > 0 && n > int64(^uint32(0)>>1)) {
			return stagedFile{}, false
		}
		v[i] = n
	}
	f := stagedFile{stageKey: stageKey{epoch: v[0], subtask: int(v[1]), attempt: int(v[2])}, part: int(v[3]), name: name}
	if stagedName(f.stageKey, f.part, format) != name {
		return stagedFile{}, false
	}
	return f, true
}

func openTransactionalSink(b *base) (Sink, error) {
	s := &txnSink{base: b, staging: filepath.Join(b.dir, StagingDir), nextPart: map[stageKey]int{}, entries: map[string]stagedEntry{}, byVisible: map[string]map[string]struct{}{}}
	if err := os.MkdirAll(s.staging, 0o755); err != nil {
		return nil, fmt.Errorf("creating staging directory %s: %w", s.staging, err)
	}
	if err := syncDir(b.dir); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *txnSink) Mode() Mode { return Transactional }

func (s *txnSink) Writer(subtask, attempt int) (Writer, error) {
	wb, err := s.newWriterBase(subtask, attempt)
	if err != nil {
		return nil, err
	}
	return &txnWriter{writerBase: wb, s: s}, nil
}

func (s *txnSink) Finish() error { return nil }

// Close drops the unflushed rows of every writer still open. Staged files
// stay for Recover.
func (s *txnSink) Close() error {
	s.closeWriters()
	return nil
}

func (s *txnSink) part(k stageKey) int {
	s.partMu.Lock()
	defer s.partMu.Unlock()
	n := s.nextPart[k]
	s.nextPart[k] = n + 1
	return n
}

// list returns the staged files in commit order (epoch, subtask, attempt,
// part) and the names of leftover temporary files. Anything else in the
// staging directory is an error: guessing what it is could publish or
// delete the wrong rows.
func (s *txnSink) list() (files []stagedFile, tmps []string, err error) {
	entries, err := os.ReadDir(s.staging)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("listing staging directory: %w", err)
	}
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, tmpPrefix) {
			tmps = append(tmps, name)
			continue
		}
		f, ok := parseStaged(name)
		if !ok || e.IsDir() {
			return nil, nil, fmt.Errorf("unexpected entry %s in staging directory: staged files are named e<epoch>-s<subtask>-a<attempt>-p<part>.<parquet|csv>", filepath.Join(s.staging, name))
		}
		files = append(files, f)
	}
	slices.SortFunc(files, func(a, b stagedFile) int {
		return cmp.Or(cmp.Compare(a.epoch, b.epoch), cmp.Compare(a.subtask, b.subtask),
			cmp.Compare(a.attempt, b.attempt), cmp.Compare(a.part, b.part))
	})
	return files, tmps, nil
}

func (s *txnSink) step(step, name string) error {
	if s.hook != nil {
		return s.hook(step, name)
	}
	return nil
}

// Commit publishes every staged file of an epoch <= epoch by renaming it
// onto its visible name, replacing a file an earlier attempt published for
// the same epoch, subtask and part. Each rename is atomic, so a crash at any
// point leaves every staged file either still staged or published; running
// Commit (or Recover) again publishes the rest. If two attempts staged the
// same epoch, subtask and part, the later attempt's file is published and
// the earlier one dropped. With a journal attached, each file is compared
// with its entry first and a damaged or unknown one is refused, never
// published (txnjournal.go).
func (s *txnSink) Commit(epoch int64) error {
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	if err := s.commitLocked(epoch); err != nil {
		return fmt.Errorf("committing epochs <= %d to %s: %w", epoch, s.dir, err)
	}
	return nil
}

func (s *txnSink) commitLocked(epoch int64) error {
	files, _, err := s.list()
	if err != nil {
		return err
	}
	published := false
	for _, g := range s.groups(files, epoch, false) {
		if len(g.staged) == 0 {
			continue
		}
		if err := s.publish(g); err != nil {
			return err
		}
		published = true
	}
	if !published {
		return nil
	}
	if err := syncDir(s.dir); err != nil {
		return err
	}
	return syncDir(s.staging)
}

// Recover commits staged epochs <= complete and discards newer staged
// epochs, together with temporary files crashed writers left behind. It
// runs before the resumed run's writers start, so nothing in the staging
// directory is still being written. A negative complete means no epoch is
// covered: everything staged is discarded.
func (s *txnSink) Recover(complete int64) error {
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	if err := s.recoverLocked(complete); err != nil {
		return fmt.Errorf("recovering %s to epoch %d: %w", s.dir, complete, err)
	}
	return nil
}

func (s *txnSink) recoverLocked(complete int64) error {
	if err := s.commitLocked(complete); err != nil {
		return err
	}
	if err := s.checkPublished(complete); err != nil {
		return err
	}
	files, tmps, err := s.list()
	if err != nil {
		return err
	}
	removed := 0
	for _, f := range files {
		if f.epoch > complete {
			// The entry goes first: an entry then always names a file
			// that is staged or was published (txnjournal.go).
			if err := s.forget(f.name); err != nil {
				return err
			}
			if err := removeIfExists(filepath.Join(s.staging, f.name)); err != nil {
				return fmt.Errorf("discarding staged epoch %d: %w", f.epoch, err)
			}
			removed++
		}
	}
	for _, t := range tmps {
		if err := removeIfExists(filepath.Join(s.staging, t)); err != nil {
			return err
		}
		removed++
	}
	if removed > 0 {
		if err := syncDir(s.staging); err != nil {
			return err
		}
	}
	return nil
}

// parseVisibleEpoch returns the epoch of a published file's name
// (part-e<epoch>-s<subtask>-p<part>.<ext>, see visibleName).
func parseVisibleEpoch(name string) (int64, bool) {
	if _, ok := formatOfName(name); !ok {
		return 0, false
	}
	stem := name[:len(name)-len(filepath.Ext(name))]
	var e, sub, part int64
	if n, err := fmt.Sscanf(stem, "part-e%d-s%d-p%d", &e, &sub, &part); err != nil || n != 3 ||
		fmt.Sprintf("part-e%d-s%d-p%d", e, sub, part) != stem || e < 0 {
		return 0, false
	}
	return e, true
}

// PublishedAfter reads back what Commit has made visible for epochs > after:
// the rows, in the layout's column order, and the greatest published epoch
// (-1 when nothing is published). An executor that resumes from a recovery
// point covering only epochs <= after, while later epochs are already
// visible (it fell back past an unreadable newer point), uses it not to
// publish those rows again and not to reuse their epochs.
func (s *txnSink) PublishedAfter(after int64) (last int64, rows [][]int64, err error) {
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return -1, nil, fmt.Errorf("listing published epochs of %s: %w", s.dir, err)
	}
	last = -1
	for _, e := range entries {
		epoch, ok := parseVisibleEpoch(e.Name())
		if !ok || e.IsDir() {
			continue
		}
		last = max(last, epoch)
		if epoch <= after {
			continue
		}
		path := filepath.Join(s.dir, e.Name())
		// The rows read back here decide what is not published again,
		// so the file must be what the journal says was published.
		if je, ok := s.entryOfVisible(e.Name()); ok {
			if err := s.verify(path, je, "published file", "its rows cannot be read back"); err != nil {
				return -1, nil, err
			}
		}
		if f, _ := formatOfName(e.Name()); f == Parquet {
			rows, err = readParquet(path, s.shape, rows)
		} else {
			rows, err = readCSV(path, s.shape, rows)
		}
		if err != nil {
			return -1, nil, fmt.Errorf("reading published epoch %d of %s: %w", epoch, s.dir, err)
		}
	}
	return last, rows, nil
}

type txnWriter struct {
	*writerBase
	s *txnSink
}

// Flush pre-commits every buffered epoch <= epoch: one staged file per
// epoch, written hidden and synced, linked under its staged name, and the
// staging directory synced once for all of them. Rows of later epochs stay
// buffered: the recovery point being taken does not cover them.
func (w *txnWriter) Flush(epoch int64) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.check(); err != nil {
		return err
	}
	epochs, bufs := w.take(epoch)
	if len(bufs) == 0 {
		return nil
	}
	var tmps []string
	defer func() {
		for _, t := range tmps {
			_ = removeIfExists(t)
		}
	}()
	entries := make([]stagedEntry, 0, len(bufs))
	for i, rb := range bufs {
		e, err := w.stage(epochs[i], rb, &tmps)
		entries = append(entries, e)
		if err != nil {
			for _, rest := range bufs[i+1:] {
				rest.release()
			}
			return w.fail(fmt.Errorf("transactional flush of subtask %d attempt %d, epoch %d: %w", w.subtask, w.attempt, epochs[i], err))
		}
	}
	// The entries are recorded before Flush returns, so a recovery point
	// that covers these epochs implies they are durable; and alongside the
	// directory sync, which halves what they add to a flush. An entry that
	// lands while its file's rename does not (a crash in between) is of an
	// epoch no recovery point covers: Recover drops it.
	recorded := make(chan error, 1)
	go func() { recorded <- w.s.record(entries) }()
	err := syncDir(w.s.staging)
	if rerr := <-recorded; err == nil {
		err = rerr
	}
	if err != nil {
		return w.fail(fmt.Errorf("transactional flush of subtask %d attempt %d: %w", w.subtask, w.attempt, err))
	}
	return nil
}

// stage writes one epoch's buffer to a staged file, consuming the buffer,
// and returns what the file holds. The temporary name is added to tmps for
// removal after the directory sync.
func (w *txnWriter) stage(epoch int64, rb *rowBuf, tmps *[]string) (stagedEntry, error) {
	cols, release := rb.finish()
	k := stageKey{epoch: epoch, subtask: w.subtask, attempt: w.attempt}
	rows := int64(len(cols[0]))
	fill := encodeFile(w.sink.format, w.sink.shape, [][][]int64{cols})
	var sum uint32
	tmp, size, err := writeTemp(w.s.staging, fmt.Sprintf("e%d-s%d-a%d", epoch, w.subtask, w.attempt), nil, func(out io.Writer) error {
		h := crc32.New(castagnoli)
		err := fill(io.MultiWriter(out, h))
		sum = h.Sum32()
		return err
	})
	release()
	if err != nil {
		return stagedEntry{}, err
	}
	*tmps = append(*tmps, tmp)
	// Part numbers count this writer's flushes of the epoch, so a re-run of
	// the same epoch produces the same names. A staged file of the same
	// name can only be left by an earlier process that reused this attempt
	// number and was never recovered; the new rows replace it.
	f := stagedFile{stageKey: k, part: w.s.part(k)}
	f.name = stagedName(k, f.part, w.sink.format)
	e := stagedEntry{File: f.name, Epoch: epoch, Subtask: w.subtask, Attempt: w.attempt, Part: f.part, Rows: rows, Size: size, CRC32C: sum}
	return e, os.Rename(tmp, filepath.Join(w.s.staging, f.name))
}

func (w *txnWriter) Close() error { return w.close() }
