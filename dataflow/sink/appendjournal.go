package sink

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"regexp"
	"slices"
	"sync"
)

// The append sink's journal (see journal.go). An append file is visible
// from its flush, and once a recovery point covers its rows they are not
// produced again: so what a recovery point covers must be on record before
// the point is durable, or a kill between the two leaves covered files no
// one checks. The protocol, in order, for recovery point E:
//
//  1. every sink subtask flushes its rows of epochs <= E (each flush notes
//     its file, with its epoch, rows, size and CRC32C, in memory);
//  2. Record(E) writes one object listing the noted files of epochs <= E
//     not listed yet, and returns once it is durable:
//     <run prefix>destination/append/<epoch>-<token>.json
//  3. the executor writes recovery point E (checkpoint metadata, commit
//     log entry, _SUCCESS marker);
//  4. Commit(E) lists what Record left (normally nothing: no Put).
//
// So the cost is one Put per recovery point that covers new files, not one
// per flush. A resumed run checks, at its first Recover(complete), every
// file a record of an epoch <= complete lists, and refuses one that is
// missing or changed. A record written for a point that never became
// durable (a kill between 2 and 3) has an epoch > complete and is not
// checked: its rows are produced again. Its files are checked at a later
// resume from a point >= its epoch; being visible and never removed they
// are there, so only damage to them (rows that were produced again) is
// refused then, an error rather than a wrong result.
//
// This design (the record before the point) was chosen over carrying each
// subtask's flush receipt in the recovery point itself: it needs no change
// to the executors' recovery point formats, only one call before each
// point, and the executors' points stay the only thing they read back.
// Disk-phase also marks each partition it writes in a job commit
// (published/p<r>) so a redone commit does not write it twice: that mark
// is a recovery point of its own, between two records, so it carries the
// writer's receipt (Receipt) and a redone commit hands it back (Adopt);
// a record per partition would be a Put per flush.
//
// Files no record lists are left as they are: they were flushed after the
// newest durable recovery point, and the replay writes their rows again
// (counted as duplicates).

// appendRecordDir holds the append sink's records.
const appendRecordDir = "append/"

// appendRecordVersion 2 added in-progress files (rolling); version 1
// records, which have none, are read as they are.
const appendRecordVersion = 2

// appendFile is what a record says one visible append file holds.
type appendFile struct {
	File   string `json:"file"`
	Rows   int64  `json:"rows"`
	Size   int64  `json:"size"`
	CRC32C uint32 `json:"crc32c"`
	// From is the in-progress file a roll made it from: once a record of
	// a durable point lists it, that file is not needed.
	From string `json:"from,omitempty"`
	// epoch is the flush's, in memory only: a record of epoch E lists
	// the files of epochs <= E.
	epoch int64
}

// inProgressEntry says what the first Bytes of an in-progress file hold
// (see roll.go): the rows of its flushes of epochs <= the record's.
type inProgressEntry struct {
	File   string `json:"file"`
	Bytes  int64  `json:"bytes"`
	Rows   int64  `json:"rows"`
	CRC32C uint32 `json:"crc32c"`
	epoch  int64
}

func (e inProgressEntry) holds() string {
	return fmt.Sprintf("%d bytes hold %d rows, crc32c %08x", e.Bytes, e.Rows, e.CRC32C)
}

type appendRecord struct {
	V          int               `json:"v"`
	Epoch      int64             `json:"epoch"`
	Files      []appendFile      `json:"files"`
	InProgress []inProgressEntry `json:"in_progress,omitempty"`
}

var appendNameRE = regexp.MustCompile(`^part-s[0-9]+-a[0-9]+-[0-9]{6,}\.[a-z]+$`)

var inProgressNameRE = regexp.MustCompile(`^` + InProgressDir + `/part-s[0-9]+-a[0-9]+-[0-9]{6,}\.[a-z]+$`)

// appendRecordRE: <epoch, 20 digits>-<16 hex digits>.json
var appendRecordRE = regexp.MustCompile(`^([0-9]{20})-[0-9a-f]{16}\.json$`)

func appendRecordName(epoch int64) string {
	var tok [8]byte
	_, _ = rand.Read(tok[:]) // never fails (crypto/rand)
	return fmt.Sprintf("%020d-%s.json", epoch, hex.EncodeToString(tok[:]))
}

func encodeAppendRecord(r appendRecord) []byte {
	if r.V == 0 {
		r.V = appendRecordVersion
	}
	b, _ := json.Marshal(r) // plain fields: cannot fail
	return b
}

// decodeAppendRecord decodes the record stored under name. Anything but a
// complete record whose epoch matches its name is an error.
func decodeAppendRecord(name string, data []byte) (appendRecord, error) {
	var r appendRecord
	m := appendRecordRE.FindStringSubmatch(name)
	if m == nil {
		return r, fmt.Errorf("append record %s: not a record's name", name)
	}
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	if err := d.Decode(&r); err != nil {
		return r, fmt.Errorf("append record %s: %w", name, err)
	}
	if d.More() {
		return r, fmt.Errorf("append record %s: data after the record", name)
	}
	if r.V < 1 || r.V > appendRecordVersion {
		return r, fmt.Errorf("append record %s: version %d, want 1 to %d", name, r.V, appendRecordVersion)
	}
	if r.Epoch < 0 || fmt.Sprintf("%020d", r.Epoch) != m[1] {
		return r, fmt.Errorf("append record %s: epoch %d disagrees with its name", name, r.Epoch)
	}
	if len(r.Files) == 0 && len(r.InProgress) == 0 {
		return r, fmt.Errorf("append record %s lists no file", name)
	}
	for _, f := range r.Files {
		if !appendNameRE.MatchString(f.File) || f.Rows < 0 || f.Size <= 0 || (f.From != "" && !inProgressNameRE.MatchString(f.From)) {
			return r, fmt.Errorf("append record %s: entry %q with %d rows, %d bytes is not an append file", name, f.File, f.Rows, f.Size)
		}
	}
	for _, e := range r.InProgress {
		if !inProgressNameRE.MatchString(e.File) || e.Rows < 0 || e.Bytes < segHeader {
			return r, fmt.Errorf("append record %s: in-progress entry %q with %d rows, %d bytes is not an in-progress file", name, e.File, e.Rows, e.Bytes)
		}
	}
	return r, nil
}

func (f appendFile) holds() string {
	return fmt.Sprintf("%d rows, %d bytes, crc32c %08x", f.Rows, f.Size, f.CRC32C)
}

// appendJournal is the append sink's part of the journal.
type appendJournal struct {
	// commitMu keeps Commits in order; mu guards the fields below and is
	// never held across a storage call, so writers' Flushes do not wait
	// for a record's Put.
	commitMu sync.Mutex
	mu       sync.Mutex
	journal  *Journal
	pending  []appendFile // flushed since the newest record
	// pendingIP: in-progress appends since the newest record.
	pendingIP []inProgressEntry
	// rolled: in-progress files whose visible file a record lists, by
	// that record's epoch; removed once a point that late is complete.
	rolled  map[string]int64
	records []appendRecord
	checked bool
	// removing counts the background removals of rolled files (Commit);
	// rmErr is the first that failed.
	removing sync.WaitGroup
	rmErr    error
}

// Attach implements Attacher: it reads the run's append records; the
// directory is compared with them at the next Recover.
func (s *appendSink) Attach(j *Journal) error {
	var mu sync.Mutex
	var recs []appendRecord
	err := j.loadEach(appendRecordDir, func(name string, b []byte) error {
		r, err := decodeAppendRecord(name, b)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		recs = append(recs, r)
		return nil
	})
	if err != nil {
		return err
	}
	recs = slices.DeleteFunc(recs, func(r appendRecord) bool { return r.Files == nil && r.InProgress == nil })
	s.aj.mu.Lock()
	defer s.aj.mu.Unlock()
	s.aj.journal, s.aj.records, s.aj.pending, s.aj.pendingIP, s.aj.checked = j, recs, nil, nil, false
	s.aj.rolled = map[string]int64{}
	return nil
}

// flushed notes a file Flush published, for the next record. It reports
// whether there is a journal to note it in.
func (s *appendSink) flushed(f appendFile) bool {
	s.aj.mu.Lock()
	defer s.aj.mu.Unlock()
	if s.aj.journal != nil {
		s.aj.pending = append(s.aj.pending, f)
	}
	return s.aj.journal != nil
}

// inProgressFlushed notes rows a flush appended to an in-progress file.
func (s *appendSink) inProgressFlushed(e inProgressEntry) {
	s.aj.mu.Lock()
	defer s.aj.mu.Unlock()
	if s.aj.journal != nil {
		s.aj.pendingIP = append(s.aj.pendingIP, e)
	}
}

// Record makes durable that recovery point epoch covers the files flushed
// for epochs <= epoch: one Put, none when there are none. Executors call
// it after every sink subtask flushed the epoch and before the point is
// written.
func (s *appendSink) Record(epoch int64) error {
	s.aj.commitMu.Lock()
	defer s.aj.commitMu.Unlock()
	s.aj.mu.Lock()
	j := s.aj.journal
	var files, later []appendFile
	for _, f := range s.aj.pending {
		if f.epoch <= epoch {
			files = append(files, f)
		} else {
			later = append(later, f)
		}
	}
	// An in-progress file's flushes come in epoch order, so those of
	// epochs <= epoch are a prefix: the newest of them says it all.
	var ips, laterIP []inProgressEntry
	newest := map[string]int{}
	for _, e := range s.aj.pendingIP {
		if e.epoch > epoch {
			laterIP = append(laterIP, e)
			continue
		}
		if i, ok := newest[e.File]; ok {
			ips[i] = e
		} else {
			newest[e.File] = len(ips)
			ips = append(ips, e)
		}
	}
	if j == nil || len(files)+len(ips) == 0 {
		s.aj.mu.Unlock()
		return nil
	}
	s.aj.pending, s.aj.pendingIP = later, laterIP
	s.aj.mu.Unlock()
	r := appendRecord{V: appendRecordVersion, Epoch: epoch, Files: files, InProgress: ips}
	err := j.put(appendRecordDir+appendRecordName(epoch), encodeAppendRecord(r))
	s.aj.mu.Lock()
	defer s.aj.mu.Unlock()
	if err != nil {
		// Not recorded: the next record lists these files first.
		s.aj.pending = append(files, s.aj.pending...)
		s.aj.pendingIP = append(ips, s.aj.pendingIP...)
		return err
	}
	for _, f := range files {
		if f.From != "" {
			s.aj.rolled[f.From] = epoch
		}
	}
	// Only this process's first Recover reads the records; once it has
	// run, they are durable in the journal and kept here for nobody, and
	// an endless run would hold one per file it ever wrote.
	if !s.aj.checked {
		s.aj.records = append(s.aj.records, r)
	}
	return nil
}

// Commit lists what Record(epoch) did not (nothing, when the executor
// called it before the recovery point; the reference executor does not).
// Commit also removes the in-progress files whose visible file a record
// of an epoch <= epoch lists: that point is complete, so a resume starts
// from it or a later one and never needs them again.
//
// The removals run in the background: unlinking a rolled file of 32 MiB
// took 11–14 ms on this project's VM, inside the publish step of the
// micro-batch that made its point complete. A removal that has failed is
// reported by the next Commit (or Finish); a Commit does not wait for the
// removals still running.
func (s *appendSink) Commit(epoch int64) error {
	if err := s.Record(epoch); err != nil {
		return err
	}
	if err := s.aj.failedRemoval(); err != nil {
		return err
	}
	if done := s.aj.takeRolled(epoch); len(done) > 0 {
		s.aj.removing.Add(1)
		go func() {
			defer s.aj.removing.Done()
			s.aj.remove(s.dir, done)
		}()
	}
	return nil
}

// takeRolled takes the rolled in-progress files whose roll a record of an
// epoch <= epoch lists.
func (aj *appendJournal) takeRolled(epoch int64) []string {
	aj.mu.Lock()
	defer aj.mu.Unlock()
	var done []string
	for l, e := range aj.rolled {
		if e <= epoch {
			done = append(done, l)
			delete(aj.rolled, l)
		}
	}
	return done
}

// remove removes the in-progress files done (names relative to dir).
// Not synced: a removal a crash undoes is done again by the resume, which
// finds the file's visible one on record.
func (aj *appendJournal) remove(dir string, done []string) {
	for _, l := range done {
		if err := removeIfExists(filepath.Join(dir, l)); err != nil {
			aj.mu.Lock()
			aj.rmErr = cmp.Or(aj.rmErr, err)
			aj.mu.Unlock()
			return
		}
	}
}

// removeErr waits for the background removals and returns the first that
// failed.
func (aj *appendJournal) removeErr() error {
	aj.removing.Wait()
	return aj.failedRemoval()
}

// failedRemoval is the first background removal that has failed so far.
func (aj *appendJournal) failedRemoval() error {
	aj.mu.Lock()
	defer aj.mu.Unlock()
	return aj.rmErr
}

// commitRolled removes, now, the rolled in-progress files of records of
// epochs <= epoch, after any removal still running in the background.
func (aj *appendJournal) commitRolled(dir string, epoch int64) error {
	aj.remove(dir, aj.takeRolled(epoch))
	return aj.removeErr()
}

// Recover checks, once per process, every file a record of an epoch <=
// complete lists. Records of newer epochs (a recovery point that was
// recorded but is not the one resumed from) cover rows the replay writes
// again, so they are not checked. An in-progress file such a record lists,
// and no record <= complete lists the roll of, is checked up to the bytes
// the newest record says it holds and those rows are published now (what
// it holds after them comes again). Other in-progress files an earlier
// process left are removed: their rows come again, or are visible already.
func (s *appendSink) Recover(complete int64) error {
	if err := s.aj.removeErr(); err != nil {
		return err
	}
	// The open writers' files, taken before aj.mu: a roll holds its
	// writer's lock and then takes aj.mu.
	open := map[string]bool{}
	s.rollMu.Lock()
	ws := s.liveWriters()
	s.rollMu.Unlock()
	for _, w := range ws {
		w.mu.Lock()
		if w.cur != nil {
			open[w.cur.name] = true
		}
		if w.sealed != nil {
			open[w.sealed.name] = true
		}
		w.mu.Unlock()
	}
	s.aj.mu.Lock()
	defer s.aj.mu.Unlock()
	if s.aj.journal == nil || s.aj.checked {
		return nil
	}
	recs := slices.Clone(s.aj.records)
	slices.SortFunc(recs, func(a, b appendRecord) int { return cmp.Compare(a.Epoch, b.Epoch) })
	rolled := map[string]bool{}
	ips := map[string]inProgressEntry{}
	for _, r := range recs {
		if r.Epoch > complete {
			continue
		}
		for _, f := range r.Files {
			if err := s.verifyAppend(f, r.Epoch); err != nil {
				return err
			}
			if f.From != "" {
				rolled[f.From] = true
			}
		}
		for _, e := range r.InProgress {
			if old, ok := ips[e.File]; !ok || e.Bytes >= old.Bytes {
				e.epoch = r.Epoch
				ips[e.File] = e
			}
		}
	}
	names := make([]string, 0, len(ips))
	for n := range ips {
		if !rolled[n] {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	for _, n := range names {
		f, ok, err := s.recoverInProgress(ips[n], ips[n].epoch, true)
		if err != nil {
			return err
		}
		// Listed by the next record; the in-progress file stays until a
		// complete point has that record.
		if ok {
			s.aj.pending = append(s.aj.pending, f)
		}
		open[n] = true
	}
	// The other tails: rolled ones (their visible file is there) go; the
	// rows of the rest were visible and stay so. A tail no record <=
	// complete lists holds rows flushed after that point, which come
	// again as duplicates; an empty one just goes.
	shadowed, live, err := leftTails(s.dir, open)
	if err != nil {
		return err
	}
	for _, n := range live {
		f, ok, err := s.recoverInProgress(inProgressEntry{File: n}, complete, false)
		if err != nil {
			return err
		}
		if ok {
			s.aj.pending = append(s.aj.pending, f)
		} else {
			shadowed = append(shadowed, n)
		}
	}
	for _, n := range shadowed {
		if err := removeIfExists(filepath.Join(s.dir, n)); err != nil {
			return err
		}
	}
	s.aj.checked = true
	return nil
}

func (s *appendSink) verifyAppend(f appendFile, epoch int64) error {
	path := filepath.Join(s.dir, f.File)
	size, sum, err := fileCRC(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("append file %s of recovery point %d is missing (the run's record of its destination says it holds %s): %s",
			path, epoch, f.holds(), refuseHint)
	}
	if err != nil {
		return fmt.Errorf("checking append file %s: %w", path, err)
	}
	if size != f.Size || sum != f.CRC32C {
		return fmt.Errorf("append file %s of recovery point %d is damaged: it has %d bytes, crc32c %08x, but the run's record of its destination says %s: %s",
			path, epoch, size, sum, f.holds(), refuseHint)
	}
	return nil
}
