package sink

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// Rolling (append mode). Publishing every flush as its own visible file
// makes one small file per flush: thousands a second at a low buffer
// timeout, each mostly Parquet footer. With a roll policy an append
// writer keeps one in-progress file instead, under InProgressDir, and
// every flush appends its rows to it and fsyncs it. The file is part of
// the output, the writer's tail: readers read its complete segments
// beside the visible files (tail.go), so a flush's rows are visible when
// it returns. The in-progress file rolls (its rows are written as one
// visible data file, published the usual way) once it is RollPolicy.Age
// old or RollPolicy.Size big, as file sinks roll part files; the price is
// that its rows are written twice.
//
// An in-progress file is a sequence of segments, one per flush:
//
//	"RWSG" | columns uint32 | rows uint64 | crc32c of the payload uint32 | crc32c of the header's first 20 bytes uint32
//	payload: for each column in layout order, rows int64 values, little endian
//
// so the first n bytes of the file say exactly which rows they hold, and a
// journal record can name a prefix (bytes, rows, crc32c) that a resumed run
// checks and publishes (see appendroll.go).

// InProgressDir holds the append sink's in-progress files. Its leading
// underscore keeps it from readers that know only data files (a file:
// input, --overwrite's check); rewind's own readers read it as the
// writers' tails (tail.go).
const InProgressDir = "_inprogress"

// RollPolicy says when an append writer's in-progress file becomes a
// visible data file.
type RollPolicy struct {
	// Age: the file rolls at the first flush (or the sink's next check,
	// every Age/4) once its first rows are this old. 0: no in-progress
	// file, every flush its own visible file.
	Age time.Duration
	// Size: the file also rolls at the flush that brings it to this many
	// bytes (8 per value, a segment header per flush). 0: no size limit.
	Size int64
}

// DefaultRollPolicy is what rewind run and rewind bench use unless told
// otherwise (--roll-age, --roll-size); see docs/output-contract.md for why.
var DefaultRollPolicy = RollPolicy{Age: 10 * time.Second, Size: 32 << 20}

func (p RollPolicy) rolls() bool { return p.Age > 0 }

// Roll sets the roll policy of s's append writers, those handed out before
// and after the call. Sinks of the other modes publish by their own rules
// and ignore it. A negative age or size is an error.
func Roll(s Sink, p RollPolicy) error {
	if p.Age < 0 || p.Size < 0 {
		return fmt.Errorf("roll policy: age %s and size %d must not be negative", p.Age, p.Size)
	}
	if a, ok := s.(*appendSink); ok {
		a.setRoll(p)
	}
	return nil
}

// VisibleFlusher is implemented by writers that say when a flush's rows
// became visible (append: when the flush returns, with or without a roll
// policy). An executor that measures latency until rows are visible uses
// it.
type VisibleFlusher interface {
	// FlushVisible is Flush; visible is called once with the time the
	// flushed rows became visible: before FlushVisible returns when they
	// are visible at once, later, from whichever goroutine rolls the file,
	// otherwise. It is never called for rows that do not become visible
	// in this process (a failed writer, a sink closed unfinished).
	FlushVisible(epoch int64, visible func(at time.Time)) error
}

const (
	segMagic  = "RWSG"
	segHeader = 24
)

// encodeSegment returns one segment holding chunks' rows.
func encodeSegment(ncols int, chunks [][][]int64) (seg []byte, rows int64) {
	for _, c := range chunks {
		if len(c) > 0 {
			rows += int64(len(c[0]))
		}
	}
	seg = make([]byte, segHeader, segHeader+int(rows)*ncols*8)
	for col := 0; col < ncols; col++ {
		for _, c := range chunks {
			for _, v := range c[col] {
				seg = binary.LittleEndian.AppendUint64(seg, uint64(v))
			}
		}
	}
	copy(seg, segMagic)
	binary.LittleEndian.PutUint32(seg[4:], uint32(ncols))
	binary.LittleEndian.PutUint64(seg[8:], uint64(rows))
	binary.LittleEndian.PutUint32(seg[16:], crc32.Checksum(seg[segHeader:], castagnoli))
	binary.LittleEndian.PutUint32(seg[20:], crc32.Checksum(seg[:20], castagnoli))
	return seg, rows
}

// decodeSegments reads the rows of data, a whole number of segments of
// ncols columns, as column chunks (one per segment).
func decodeSegments(data []byte, ncols int) (chunks [][][]int64, rows int64, err error) {
	used, rows, err := decodeTail(data, ncols, &chunks)
	if err == nil && used != int64(len(data)) {
		err = fmt.Errorf("segment at byte %d is cut short", used)
	}
	return chunks, rows, err
}

// decodeTail appends the complete segments of data to chunks and says how
// many bytes they take: the end of a tail may be cut short.
func decodeTail(data []byte, ncols int, chunks *[][][]int64) (used, rows int64, err error) {
	return eachSegment(bytes.NewReader(data), int64(len(data)), ncols, func(cols [][]int64) error {
		c := make([][]int64, len(cols))
		for i := range cols {
			c[i] = slices.Clone(cols[i])
		}
		*chunks = append(*chunks, c)
		return nil
	})
}

// inProgress is one writer's open in-progress file.
type inProgress struct {
	name  string // relative to the output directory: _inprogress/<visible name>
	f     *os.File
	bytes int64
	rows  int64
	crc   uint32 // crc32c of the file's bytes so far
	first time.Time
	epoch int64 // greatest flush epoch in the file
}

// createInProgress creates dir/_inprogress/<visible> exclusively and makes
// its name durable. ok is false when the name is taken. parentDurable says
// that this process already synced dir since InProgressDir existed, so
// the directory's own entry needs no second fsync: a new in-progress file
// is opened by the flush after a roll, on the latency path.
func createInProgress(dir, visible string, parentDurable bool) (ip *inProgress, ok bool, err error) {
	idir := filepath.Join(dir, InProgressDir)
	if err := os.MkdirAll(idir, 0o755); err != nil {
		return nil, false, fmt.Errorf("creating %s: %w", idir, err)
	}
	name := filepath.Join(InProgressDir, visible)
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, os.ErrExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("creating in-progress file: %w", err)
	}
	// The name must survive a crash: a record will point at it.
	if err := syncDir(idir); err != nil {
		_ = f.Close()
		return nil, false, err
	}
	if !parentDurable {
		if err := syncDir(dir); err != nil {
			_ = f.Close()
			return nil, false, err
		}
	}
	return &inProgress{name: name, f: f, epoch: -1}, true, nil
}

// append writes one segment and fsyncs the file.
func (ip *inProgress) append(seg []byte, rows, epoch int64, now time.Time) error {
	if _, err := ip.f.Write(seg); err != nil {
		return fmt.Errorf("appending to in-progress file %s: %w", ip.name, err)
	}
	if err := ip.f.Sync(); err != nil {
		return fmt.Errorf("syncing in-progress file %s: %w", ip.name, err)
	}
	if ip.rows == 0 && ip.first.IsZero() {
		ip.first = now
	}
	ip.bytes += int64(len(seg))
	ip.rows += rows
	ip.crc = crc32.Update(ip.crc, castagnoli, seg)
	ip.epoch = max(ip.epoch, epoch)
	return nil
}

// due reports whether the file must roll now under p.
func (ip *inProgress) due(p RollPolicy, now time.Time) bool {
	if ip.rows == 0 {
		return false
	}
	return !p.rolls() || now.Sub(ip.first) >= p.Age || (p.Size > 0 && ip.bytes >= p.Size)
}

var (
	errShortPrefix = errors.New("shorter than its record says")
	errPrefixCRC   = errors.New("its first bytes differ from its record")
)
