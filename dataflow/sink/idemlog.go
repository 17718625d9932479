package sink

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// The idempotent sink's log. Writing a flush's random keys into the store
// itself (a B+tree once, a bbolt transaction per flush) cost milliseconds
// to seconds once flushes held thousands of keys. A flush is therefore
// acknowledged once its rows are appended to a sequential log and
// fsynced; a background applier (idemapply.go) moves them into the store
// of sorted runs (idemstore.go) later, in large key-sorted runs that
// record the last frame they hold.
//
// The log is at most two files: IdempotentLog, being appended to, and
// idemLogOld, the previous one, which the applier removes once its frames
// are in the store. Each starts with a header (magic, the store's id, the
// sequence number of its first frame, CRC32C); then frames: payload
// length, sequence number, CRC32C of those and the payload, and the
// payload, whole store rows (key, columns, row checksum). Sequence numbers
// run on from one file to the next, so a missing frame is a gap.

// IdempotentLog is the file name of the idempotent store's log in the
// output directory.
const IdempotentLog = "_idempotent.log"

// idemLogOld is the log file before the newest rotation.
const idemLogOld = "_idempotent-old.log"

var idemLogMagic = []byte("RWIDLOG1")

const (
	idemLogHeaderLen = 8 + 32 + 8 + 4
	idemFrameHdrLen  = 4 + 8 + 4
)

// idemSegmentBytes is the size past which the log is rotated (when the
// older file is gone); a variable so tests can rotate often.
var idemSegmentBytes int64 = 64 << 20

// logChunk is the rows of one frame.
type logChunk struct {
	seq  int64
	rows []byte
}

// idemLog is the writing side, used under the sink's lmu: the group
// commit's leader appends, the applier removes idemLogOld, Close closes.
type idemLog struct {
	dir, id string
	f       *os.File
	size    int64
	next    int64 // the next frame's sequence number
	broken  error // a failed write leaves the tail unknown: no more appends
	oldLast int64 // the last frame in idemLogOld; 0: no such file
}

func (l *idemLog) path(name string) string { return filepath.Join(l.dir, name) }

// create starts a new IdempotentLog whose first frame will be l.next,
// durable (file and directory entry) before any frame is acknowledged in it.
func (l *idemLog) create() error {
	p := l.path(IdempotentLog)
	f, err := os.OpenFile(p, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	h := make([]byte, idemLogHeaderLen)
	copy(h, idemLogMagic)
	copy(h[8:], l.id)
	binary.BigEndian.PutUint64(h[40:], uint64(l.next))
	binary.BigEndian.PutUint32(h[48:], crc32.Checksum(h[:48], castagnoli))
	if _, err := f.Write(h); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := syncDir(l.dir); err != nil {
		f.Close()
		return err
	}
	l.f, l.size = f, idemLogHeaderLen
	return nil
}

// rotate renames the full log to idemLogOld and starts a new one.
func (l *idemLog) rotate() error {
	if err := l.f.Close(); err != nil {
		return err
	}
	l.f = nil
	if err := os.Rename(l.path(IdempotentLog), l.path(idemLogOld)); err != nil {
		return err
	}
	return l.create()
}

// append writes frame (idemFrameHdrLen bytes of room, then the payload)
// as the next frame and fsyncs it; the rows are durable when it returns.
func (l *idemLog) append(frame []byte) (int64, error) {
	if l.broken != nil {
		return 0, l.broken
	}
	seq := l.next
	binary.BigEndian.PutUint32(frame[0:], uint32(len(frame)-idemFrameHdrLen))
	binary.BigEndian.PutUint64(frame[4:], uint64(seq))
	sum := crc32.Update(crc32.Checksum(frame[:12], castagnoli), castagnoli, frame[idemFrameHdrLen:])
	binary.BigEndian.PutUint32(frame[12:], sum)
	if _, err := l.f.Write(frame); err != nil {
		l.broken = fmt.Errorf("appending to %s: %w", l.path(IdempotentLog), err)
		return 0, l.broken
	}
	if err := l.f.Sync(); err != nil {
		l.broken = fmt.Errorf("syncing %s: %w", l.path(IdempotentLog), err)
		return 0, l.broken
	}
	l.size += int64(len(frame))
	l.next++
	return seq, nil
}

// resetLog empties the log once the store holds every frame in it, so a
// finished output does not keep a copy of its rows there. A crash midway
// leaves a log with a torn header or none, which holds nothing anyway.
func (s *idempotentSink) resetLog() error {
	s.lmu.Lock()
	defer s.lmu.Unlock()
	l := &s.log
	if l.f == nil || l.broken != nil || l.next-1 != s.ap.appliedSeq() {
		return nil // a flush raced in, or the log is unusable: leave it
	}
	if err := l.close(); err != nil {
		return err
	}
	if err := removeIfExists(l.path(idemLogOld)); err != nil {
		return err
	}
	l.oldLast = 0
	if err := l.create(); err != nil {
		l.broken = fmt.Errorf("recreating %s: %w", l.path(IdempotentLog), err)
		return l.broken
	}
	return nil
}

func (l *idemLog) close() error {
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

// errLogDamaged marks a log file that cannot be read as written.
var errLogDamaged = errors.New("damaged")

// readIdemLog reads one log file written for the store (file store) of id, whose rows are
// rowLen bytes. present is false when there is no such file. last says
// it is the newest file: only there may a torn tail (a frame whose write
// a crash cut short, never acknowledged) end it, and is dropped; anywhere
// else damage is an error.
func readIdemLog(path, store, id string, rowLen int, last bool) (chunks []logChunk, first int64, present bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, false, nil
	}
	if err != nil {
		return nil, 0, false, err
	}
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", errLogDamaged, fmt.Sprintf(format, a...))
	}
	if len(b) < idemLogHeaderLen {
		if last {
			// Cut while it was being created: it held no frame yet.
			return nil, 0, false, nil
		}
		return nil, 0, true, bad("it has %d bytes, less than a header", len(b))
	}
	h := b[:idemLogHeaderLen]
	if string(h[:8]) != string(idemLogMagic) || crc32.Checksum(h[:48], castagnoli) != binary.BigEndian.Uint32(h[48:]) {
		return nil, 0, true, bad("its header fails its checksum")
	}
	if got := string(h[8:40]); got != id {
		return nil, 0, true, fmt.Errorf("it was written for store %q, but the store %s is %s (was the store deleted or replaced?)", strings.ToValidUTF8(got, "?"), store, id)
	}
	first = int64(binary.BigEndian.Uint64(h[40:]))
	want := first
	for off := idemLogHeaderLen; off < len(b); {
		rest := len(b) - off
		torn := func(what string) error {
			if last {
				return nil
			}
			return bad("the frame at byte %d %s", off, what)
		}
		if rest < idemFrameHdrLen {
			return chunks, first, true, torn("is cut short")
		}
		n := int(binary.BigEndian.Uint32(b[off:]))
		end := off + idemFrameHdrLen + n
		if n > rest-idemFrameHdrLen {
			return chunks, first, true, torn("is cut short")
		}
		sum := crc32.Update(crc32.Checksum(b[off:off+12], castagnoli), castagnoli, b[off+idemFrameHdrLen:end])
		if sum != binary.BigEndian.Uint32(b[off+12:]) {
			if end == len(b) {
				return chunks, first, true, torn("fails its checksum")
			}
			return nil, first, true, bad("the frame at byte %d fails its checksum", off)
		}
		seq := int64(binary.BigEndian.Uint64(b[off+4:]))
		switch {
		case seq != want:
			return nil, first, true, bad("the frame at byte %d is number %d, want %d", off, seq, want)
		case n == 0 || n%rowLen != 0:
			return nil, first, true, bad("the frame at byte %d holds %d bytes, not whole rows of %d", off, n, rowLen)
		}
		chunks = append(chunks, logChunk{seq: seq, rows: b[off+idemFrameHdrLen : end : end]})
		want++
		off = end
	}
	return chunks, first, true, nil
}
