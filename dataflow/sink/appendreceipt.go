package sink

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"slices"
)

// A receipt is what one append writer's flushes made visible, for an
// executor that marks a writer's flush as done in a recovery point of its
// own between two records (disk-phase's published marker, see
// appendjournal.go): the mark carries the receipt, and a redone commit
// hands it back with Adopt instead of writing the partition again, so the
// files it names are checked now and listed in the next record.

const appendReceiptVersion = 1

type appendReceipt struct {
	V     int          `json:"v"`
	Files []appendFile `json:"files"`
	// CRC32C is the checksum of Files' JSON: a changed byte that still
	// decodes (a digit of a size, a name's number) is found too.
	CRC32C uint32 `json:"crc32c"`
}

func receiptSum(files []appendFile) uint32 {
	b, _ := json.Marshal(files) // plain fields: cannot fail
	return crc32.Checksum(b, castagnoli)
}

// Receipt implements Receipter.
func (s *appendSink) Receipt(w Writer) ([]byte, error) {
	aw, ok := w.(*appendWriter)
	if !ok || aw.s != s {
		return nil, fmt.Errorf("append receipt: writer %T is not one of this sink's", w)
	}
	aw.mu.Lock()
	defer aw.mu.Unlock()
	// A receipt names visible files only: what the writer's in-progress
	// file holds is published first, and a background roll finished.
	aw.waitSealedLocked()
	if aw.cur != nil {
		if err := aw.check(); err != nil {
			return nil, err
		}
		if err := aw.rollLocked(); err != nil {
			return nil, err
		}
	}
	// Never empty, even when nothing was published: an empty mark is a
	// damaged one.
	files := append([]appendFile{}, aw.files...)
	b, _ := json.Marshal(appendReceipt{V: appendReceiptVersion, Files: files, CRC32C: receiptSum(files)}) // plain fields: cannot fail
	return b, nil
}

// Adopt implements Receipter: every file the receipt names must be there
// as it was written (an error naming it otherwise: its rows are not
// written again); then it is listed in the next record of epoch.
func (s *appendSink) Adopt(epoch int64, receipt []byte) error {
	var r appendReceipt
	d := json.NewDecoder(bytes.NewReader(receipt))
	d.DisallowUnknownFields()
	if err := d.Decode(&r); err != nil || d.More() || r.V != appendReceiptVersion || r.CRC32C != receiptSum(r.Files) {
		return fmt.Errorf("append receipt of epoch %d is damaged (%d bytes): %s", epoch, len(receipt), refuseHint)
	}
	for _, f := range r.Files {
		if !appendNameRE.MatchString(f.File) || f.Rows < 0 || f.Size <= 0 || (f.From != "" && !inProgressNameRE.MatchString(f.From)) {
			return fmt.Errorf("append receipt of epoch %d: entry %q with %d rows, %d bytes is not an append file: %s", epoch, f.File, f.Rows, f.Size, refuseHint)
		}
		if err := s.verifyAppend(f, epoch); err != nil {
			return err
		}
	}
	s.aj.mu.Lock()
	defer s.aj.mu.Unlock()
	if s.aj.journal == nil {
		return nil
	}
	for _, f := range r.Files {
		// A redone commit in the process that flushed the file finds it
		// noted already, unless its record was written after this
		// process's Recover (records are not kept then): it is listed
		// again, which checks the same file twice on a resume, no more.
		if s.aj.listed(f.File) {
			continue
		}
		f.epoch = epoch
		s.aj.pending = append(s.aj.pending, f)
	}
	return nil
}

// listed reports whether a record or the pending list has file; aj.mu held.
func (aj *appendJournal) listed(file string) bool {
	has := func(fs []appendFile) bool {
		return slices.ContainsFunc(fs, func(f appendFile) bool { return f.File == file })
	}
	if has(aj.pending) {
		return true
	}
	return slices.ContainsFunc(aj.records, func(r appendRecord) bool { return has(r.Files) })
}
