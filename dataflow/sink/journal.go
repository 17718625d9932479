package sink

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
	"sync"

	"github.com/rewind-engine/rewind/dataflow/storage"
)

// The output directory is not durable shared storage: a user, a disk or a
// clean-up script can truncate, delete or damage what a sink keeps there
// between a kill and --resume. So what the destination must hold is also
// recorded in durable storage, in the run's namespace, and a resumed run
// compares the directory with that record before relying on it. The record
// is the destination journal:
//
//	<run prefix>destination/staged/<staged name>   one entry per staged file (transactional)
//	<run prefix>destination/idempotent.json        the idempotent store's identity and row count
//	<run prefix>destination/append/<epoch>-<token>.json  the append files a recovery point covers
//
// Every object is checksummed by the store itself; the decoders below only
// have to reject what is well-formed but not an entry.

// JournalDir is the journal's directory under a run's prefix: executors
// that list their namespace find its objects there.
const JournalDir = "destination/"

// Journal is a sink's record of its destination in durable shared storage.
// A sink without one (tests of the sink alone, the reference executor)
// trusts its directory as before.
type Journal struct {
	store  storage.Store
	prefix string // <run prefix>destination/
	// ctx outlives a cancelled run: a flush that has staged a file must be
	// able to record it, or the file could never be published. The store's
	// own deadlines bound each call.
	ctx context.Context
}

// NewJournal is the journal of the run whose namespace in store is
// runPrefix (inspect.RunPrefix).
func NewJournal(ctx context.Context, store storage.Store, runPrefix string) *Journal {
	return &Journal{store: store, prefix: runPrefix + JournalDir, ctx: context.WithoutCancel(ctx)}
}

func (j *Journal) name(rel string) string { return j.prefix + rel }

func (j *Journal) put(rel string, data []byte) error {
	if err := j.store.Put(j.ctx, j.name(rel), data); err != nil {
		return fmt.Errorf("recording the destination in %s%s: %w", j.store.URL(), j.name(rel), err)
	}
	return nil
}

// get returns nil, nil for a missing object.
func (j *Journal) get(rel string) ([]byte, error) {
	b, err := j.store.Get(j.ctx, j.name(rel))
	if errors.Is(err, storage.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the destination's record %s%s: %w", j.store.URL(), j.name(rel), err)
	}
	return b, nil
}

func (j *Journal) del(rel string) error {
	if err := j.store.Delete(j.ctx, j.name(rel)); err != nil {
		return fmt.Errorf("deleting %s%s: %w", j.store.URL(), j.name(rel), err)
	}
	return nil
}

// list returns the names, relative to the journal, under rel.
func (j *Journal) list(rel string) ([]string, error) {
	objs, err := j.store.List(j.ctx, j.name(rel))
	if err != nil {
		return nil, fmt.Errorf("listing the destination's record %s%s: %w", j.store.URL(), j.name(rel), err)
	}
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = strings.TrimPrefix(o.Name, j.prefix)
	}
	return out, nil
}

// Attacher is implemented by sinks that keep state in the output directory
// a resumed run relies on (idempotent, transactional, append). Attach gives the
// sink its journal and checks the directory against what the journal says
// it holds; it is called once per process, before the sink is used, by
// whoever knows the run's namespace (run.Env.AttachDestination).
type Attacher interface {
	Attach(j *Journal) error
}

// castagnoli is the CRC32C table of every checksum the sinks keep.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// stagedEntry is the journal's record of one staged file: what Flush
// wrote, so a later Commit or Recover can tell a staged or published file
// that holds exactly these bytes from one that was lost or damaged.
type stagedEntry struct {
	V       int    `json:"v"`
	File    string `json:"file"` // staged name: e<epoch>-s<subtask>-a<attempt>-p<part>.<ext>
	Epoch   int64  `json:"epoch"`
	Subtask int    `json:"subtask"`
	Attempt int    `json:"attempt"`
	Part    int    `json:"part"`
	Rows    int64  `json:"rows"`
	Size    int64  `json:"size"`
	CRC32C  uint32 `json:"crc32c"`
}

const stagedEntryVersion = 1

// stagedEntryDir holds the staged entries, one object per staged name.
const stagedEntryDir = "staged/"

func (e stagedEntry) file() stagedFile {
	return stagedFile{stageKey: stageKey{epoch: e.Epoch, subtask: e.Subtask, attempt: e.Attempt}, part: e.Part, name: e.File}
}

// holds describes the entry for an error message.
func (e stagedEntry) holds() string {
	return fmt.Sprintf("%d rows, %d bytes, crc32c %08x", e.Rows, e.Size, e.CRC32C)
}

func encodeStagedEntry(e stagedEntry) []byte {
	e.V = stagedEntryVersion
	b, _ := json.Marshal(e) // plain fields: cannot fail
	return b
}

// decodeStagedEntry decodes the entry stored under staged name `name`.
// Anything but a complete entry for that very name is an error.
func decodeStagedEntry(name string, data []byte) (stagedEntry, error) {
	var e stagedEntry
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	if err := d.Decode(&e); err != nil {
		return e, fmt.Errorf("staged entry %s: %w", name, err)
	}
	if d.More() {
		return e, fmt.Errorf("staged entry %s: data after the entry", name)
	}
	if e.V != stagedEntryVersion {
		return e, fmt.Errorf("staged entry %s: version %d, want %d", name, e.V, stagedEntryVersion)
	}
	f, ok := parseStaged(e.File)
	switch {
	case !ok || e.File != name:
		return e, fmt.Errorf("staged entry %s names file %q", name, e.File)
	case f.epoch != e.Epoch || f.subtask != e.Subtask || f.attempt != e.Attempt || f.part != e.Part:
		return e, fmt.Errorf("staged entry %s: epoch %d subtask %d attempt %d part %d disagree with its name", name, e.Epoch, e.Subtask, e.Attempt, e.Part)
	case e.Rows <= 0 || e.Size <= 0:
		return e, fmt.Errorf("staged entry %s: %d rows, %d bytes: a staged file holds rows", name, e.Rows, e.Size)
	}
	return e, nil
}

// loadStaged reads every staged entry.
func (j *Journal) loadStaged() (map[string]stagedEntry, error) {
	out := make(map[string]stagedEntry)
	var mu sync.Mutex
	err := j.loadEach(stagedEntryDir, func(name string, b []byte) error {
		e, err := decodeStagedEntry(name, b)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		out[name] = e
		return nil
	})
	return out, err
}

// loadEach reads every record under dir, a few at a time (on S3 each is a
// round trip), and hands each to decode, which may run concurrently, with
// its name below dir. A record deleted since the listing is skipped. A
// record decode refuses is reported as damaged, naming it; of several
// errors, the first in listing order is returned.
func (j *Journal) loadEach(dir string, decode func(name string, b []byte) error) error {
	names, err := j.list(dir)
	if err != nil {
		return err
	}
	errs := make([]error, len(names))
	sem := make(chan struct{}, 8)
	var wg sync.WaitGroup
	for i, rel := range names {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			b, err := j.get(rel)
			if err != nil || b == nil {
				errs[i] = err
				return
			}
			if err := decode(strings.TrimPrefix(rel, dir), b); err != nil {
				errs[i] = fmt.Errorf("the destination's record %s%s is damaged: %w", j.store.URL(), j.name(rel), err)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// storeRecord is the journal's record of the idempotent store: which store
// the run writes (an id kept inside it) and how many rows it held at least,
// as of the newest commit.
type storeRecord struct {
	V       int    `json:"v"`
	StoreID string `json:"store_id"`
	Rows    int64  `json:"rows"`
	// LogSeq is the last log frame acknowledged (version 2; 0 in 1).
	LogSeq int64 `json:"log_seq,omitempty"`
}

const storeRecordVersion = 2

const storeRecordName = "idempotent.json"

func encodeStoreRecord(r storeRecord) []byte {
	r.V = storeRecordVersion
	b, _ := json.Marshal(r)
	return b
}

func decodeStoreRecord(data []byte) (storeRecord, error) {
	var r storeRecord
	d := json.NewDecoder(bytes.NewReader(data))
	d.DisallowUnknownFields()
	if err := d.Decode(&r); err != nil {
		return r, err
	}
	if d.More() {
		return r, errors.New("data after the record")
	}
	switch {
	case r.V != storeRecordVersion && r.V != 1:
		return r, fmt.Errorf("version %d, want %d", r.V, storeRecordVersion)
	case r.LogSeq < 0:
		return r, fmt.Errorf("log frame %d", r.LogSeq)
	case !validStoreID(r.StoreID):
		return r, fmt.Errorf("store id %q is not one a store is given", r.StoreID)
	case r.Rows < 0:
		return r, fmt.Errorf("%d rows", r.Rows)
	}
	r.V = storeRecordVersion // a version 1 record reads as one with no frame
	return r, nil
}

// validStoreID: 32 lowercase hex digits (newStoreID).
func validStoreID(id string) bool {
	if len(id) != 32 {
		return false
	}
	for _, c := range id {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
