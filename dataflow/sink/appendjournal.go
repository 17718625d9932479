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

// The append sink's journal (see journal.go): Commit(epoch), which every
// executor calls once a recovery point, batch or job commit is complete,
// writes one object listing the files flushed since the previous record:
//
//	<run prefix>destination/append/<epoch>-<token>.json
//
// So the cost is one Put per recovery point, not one per flush. A resumed
// run checks, at its first Recover(complete), every file a record of an
// epoch <= complete lists: those rows are not produced again, so a missing
// or changed file is refused. Files no record lists are left as they are:
// most were flushed after the newest recovery point, and the replay writes
// their rows again (counted as duplicates); but a crash between a recovery
// point and its record leaves files the recovery point covers unlisted, so
// removing unlisted files would lose rows. A file flushed for a newer
// epoch while Commit runs lands in the older record: if it is damaged the
// resume refuses it although its rows would come again, an error rather
// than a wrong result.

// appendRecordDir holds the append sink's records.
const appendRecordDir = "append/"

const appendRecordVersion = 1

// appendFile is what a record says one visible append file holds.
type appendFile struct {
	File   string `json:"file"`
	Rows   int64  `json:"rows"`
	Size   int64  `json:"size"`
	CRC32C uint32 `json:"crc32c"`
}

type appendRecord struct {
	V     int          `json:"v"`
	Epoch int64        `json:"epoch"`
	Files []appendFile `json:"files"`
}

var appendNameRE = regexp.MustCompile(`^part-s[0-9]+-a[0-9]+-[0-9]{6,}\.[a-z]+$`)

// appendRecordRE: <epoch, 20 digits>-<16 hex digits>.json
var appendRecordRE = regexp.MustCompile(`^([0-9]{20})-[0-9a-f]{16}\.json$`)

func appendRecordName(epoch int64) string {
	var tok [8]byte
	_, _ = rand.Read(tok[:]) // never fails (crypto/rand)
	return fmt.Sprintf("%020d-%s.json", epoch, hex.EncodeToString(tok[:]))
}

func encodeAppendRecord(r appendRecord) []byte {
	r.V = appendRecordVersion
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
	if r.V != appendRecordVersion {
		return r, fmt.Errorf("append record %s: version %d, want %d", name, r.V, appendRecordVersion)
	}
	if r.Epoch < 0 || fmt.Sprintf("%020d", r.Epoch) != m[1] {
		return r, fmt.Errorf("append record %s: epoch %d disagrees with its name", name, r.Epoch)
	}
	if len(r.Files) == 0 {
		return r, fmt.Errorf("append record %s lists no file", name)
	}
	for _, f := range r.Files {
		if !appendNameRE.MatchString(f.File) || f.Rows < 0 || f.Size <= 0 {
			return r, fmt.Errorf("append record %s: entry %q with %d rows, %d bytes is not an append file", name, f.File, f.Rows, f.Size)
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
	records  []appendRecord
	checked  bool
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
	recs = slices.DeleteFunc(recs, func(r appendRecord) bool { return r.Files == nil })
	s.aj.mu.Lock()
	defer s.aj.mu.Unlock()
	s.aj.journal, s.aj.records, s.aj.pending, s.aj.checked = j, recs, nil, false
	return nil
}

// flushed notes a file Flush published, for the next record.
func (s *appendSink) flushed(f appendFile) {
	s.aj.mu.Lock()
	defer s.aj.mu.Unlock()
	if s.aj.journal != nil {
		s.aj.pending = append(s.aj.pending, f)
	}
}

// Commit records the files flushed since the previous record as held by
// the recovery point epoch: one Put, none when nothing was flushed.
func (s *appendSink) Commit(epoch int64) error {
	s.aj.commitMu.Lock()
	defer s.aj.commitMu.Unlock()
	s.aj.mu.Lock()
	j, files := s.aj.journal, s.aj.pending
	s.aj.pending = nil
	s.aj.mu.Unlock()
	if j == nil || len(files) == 0 {
		return nil
	}
	r := appendRecord{V: appendRecordVersion, Epoch: epoch, Files: files}
	err := j.put(appendRecordDir+appendRecordName(epoch), encodeAppendRecord(r))
	s.aj.mu.Lock()
	defer s.aj.mu.Unlock()
	if err != nil {
		// Not recorded: the next record lists these files first.
		s.aj.pending = append(slices.Clip(files), s.aj.pending...)
		return err
	}
	// Only this process's first Recover reads the records; once it has
	// run, they are durable in the journal and kept here for nobody, and
	// an endless run would hold one per file it ever wrote.
	if !s.aj.checked {
		s.aj.records = append(s.aj.records, r)
	}
	return nil
}

// Recover checks, once per process, every file a record of an epoch <=
// complete lists. Records of newer epochs (a recovery point that was
// recorded but is not the one resumed from) cover rows the replay writes
// again, so they are not checked.
func (s *appendSink) Recover(complete int64) error {
	s.aj.mu.Lock()
	defer s.aj.mu.Unlock()
	if s.aj.journal == nil || s.aj.checked {
		return nil
	}
	recs := slices.Clone(s.aj.records)
	slices.SortFunc(recs, func(a, b appendRecord) int { return cmp.Compare(a.Epoch, b.Epoch) })
	for _, r := range recs {
		if r.Epoch > complete {
			continue
		}
		for _, f := range r.Files {
			if err := s.verifyAppend(f, r.Epoch); err != nil {
				return err
			}
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
