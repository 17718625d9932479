package sink

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Tails: the reader's side of an append writer's in-progress file (roll.go).
// An in-progress file is part of the output from its first flush: every
// reader (ResolveEach, so rewind resolve and a run's counts) reads the
// visible data files and, beside them, the complete segments of every tail,
// _inprogress/<name>, whose rows are not in a visible file yet. A roll
// publishes the tail's rows as the visible file <name> and leaves the tail
// (a resume may need it) until a complete recovery point lists the file, so
// the rule that makes a roll atomic for readers is by name: a tail whose
// visible file exists is not read. The visible file is linked into place in
// one step and the tail never grows after its roll, so a reader counts a
// rolled row once, from one or the other, whichever it listed.
//
// A tail is checked as it is read: every segment's header and payload carry
// a CRC32C. Only the end may be cut short (a flush being written, or one a
// kill interrupted, never acknowledged): those bytes are not rows yet. A
// segment that fails its checksum stops the reader with an error naming
// the file.

// tailSegment is one segment's header, read and checked.
type tailSegment struct {
	rows    int64
	payload int64 // bytes after the header
	crc     uint32
}

// errCutShort: the bytes left hold part of a segment only.
var errCutShort = errors.New("segment cut short")

// parseSegmentHeader checks h (segHeader bytes) for a segment of ncols
// columns; left is how many bytes follow the header in the file.
func parseSegmentHeader(h []byte, ncols int, left int64) (tailSegment, error) {
	if string(h[:4]) != segMagic {
		return tailSegment{}, errors.New("no segment header")
	}
	if crc32.Checksum(h[:20], castagnoli) != binary.LittleEndian.Uint32(h[20:]) {
		return tailSegment{}, errors.New("segment header fails its checksum")
	}
	nc := int(binary.LittleEndian.Uint32(h[4:]))
	n := binary.LittleEndian.Uint64(h[8:])
	if nc != ncols || n > uint64(left) {
		if nc == ncols {
			return tailSegment{}, errCutShort
		}
		return tailSegment{}, fmt.Errorf("segment says %d columns, want %d", nc, ncols)
	}
	sg := tailSegment{rows: int64(n), payload: int64(n) * int64(ncols) * 8, crc: binary.LittleEndian.Uint32(h[16:])}
	if sg.payload > left {
		return tailSegment{}, errCutShort
	}
	return sg, nil
}

// eachSegment reads the segments of r, size bytes of a tail, and hands
// each one's columns to each (the slices are reused afterwards). It
// returns the bytes of complete segments read and their rows; a cut-short
// end is not an error, a damaged segment is.
func eachSegment(r io.Reader, size int64, ncols int, each chunkFunc) (used, rows int64, err error) {
	br := bufio.NewReaderSize(r, 1<<16)
	var h [segHeader]byte
	var payload []byte
	cols := make([][]int64, ncols)
	for used < size {
		left := size - used
		if left < segHeader {
			return used, rows, nil
		}
		if _, err := io.ReadFull(br, h[:]); err != nil {
			return used, rows, cutShortOr(err, used)
		}
		sg, err := parseSegmentHeader(h[:], ncols, left-segHeader)
		if errors.Is(err, errCutShort) {
			return used, rows, nil
		}
		if err != nil {
			return used, rows, fmt.Errorf("segment at byte %d: %w", used, err)
		}
		payload = slices.Grow(payload[:0], int(sg.payload))[:sg.payload]
		if _, err := io.ReadFull(br, payload); err != nil {
			return used, rows, cutShortOr(err, used)
		}
		if crc32.Checksum(payload, castagnoli) != sg.crc {
			return used, rows, fmt.Errorf("segment at byte %d fails its checksum", used)
		}
		p := payload
		for c := range cols {
			cols[c] = slices.Grow(cols[c][:0], int(sg.rows))[:sg.rows]
			for i := range cols[c] {
				cols[c][i] = int64(binary.LittleEndian.Uint64(p))
				p = p[8:]
			}
		}
		if sg.rows > 0 {
			if err := each(cols); err != nil {
				return used, rows, err
			}
		}
		used += segHeader + sg.payload
		rows += sg.rows
	}
	return used, rows, nil
}

// cutShortOr: a file that ends sooner than its size said was cut while
// being read (a resume's truncation); anything else is a read error.
func cutShortOr(err error, at int64) error {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return nil
	}
	return fmt.Errorf("reading at byte %d: %w", at, err)
}

// eachTailFile hands the rows of the tail at path to each. ok is false
// when the file is gone (removed after its roll, once its visible file was
// on record).
func eachTailFile(path string, ncols int, each chunkFunc) (ok bool, err error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return false, fmt.Errorf("reading tail %s: %w", path, err)
	}
	if _, _, err := eachSegment(f, fi.Size(), ncols, each); err != nil {
		return false, fmt.Errorf("tail %s is damaged: %w", path, err)
	}
	return true, nil
}

// outputEntry is one file a reader of the output reads: a visible data
// file, or a tail (its visible name is what it rolls to).
type outputEntry struct {
	name string // the visible name, for the read order
	path string
	tail bool
	size int64
}

// listOutput lists what a reader of dir reads, in name order: its visible
// entries and the tails no visible file shadows.
func listOutput(dir string) ([]outputEntry, error) {
	// Tails first: a roll links the visible file before it may remove
	// the tail, so a tail missing from this listing has its visible
	// file in the next one.
	tails, err := os.ReadDir(filepath.Join(dir, InProgressDir))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []outputEntry
	visible := map[string]bool{}
	for _, e := range entries {
		if !isVisible(e.Name()) {
			continue
		}
		visible[e.Name()] = true
		oe := outputEntry{name: e.Name(), path: filepath.Join(dir, e.Name())}
		if fi, err := e.Info(); err == nil && !e.IsDir() {
			oe.size = fi.Size()
		}
		out = append(out, oe)
	}
	for _, e := range tails {
		n := e.Name()
		if visible[n] || !isVisible(n) || e.IsDir() || !strings.HasPrefix(n, "part-") {
			continue
		}
		oe := outputEntry{name: n, path: filepath.Join(dir, InProgressDir, n), tail: true}
		if fi, err := e.Info(); err == nil {
			oe.size = fi.Size()
		}
		out = append(out, oe)
	}
	slices.SortFunc(out, func(a, b outputEntry) int { return strings.Compare(a.name, b.name) })
	return out, nil
}
