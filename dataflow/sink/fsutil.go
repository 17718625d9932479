package sink

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rewind-engine/rewind/dataflow/storage"
)

// tmpPrefix starts the name of every file still being written. The leading
// dot keeps it invisible, so a reader never sees half a file, and a crash
// leaves only ignorable debris behind.
const tmpPrefix = ".tmp-"

// isVisible reports whether a directory entry name is part of the output.
func isVisible(name string) bool {
	return name != "" && !strings.HasPrefix(name, "_") && !strings.HasPrefix(name, ".")
}

// writeBufs pools the 1 MiB write buffers: a sink writes a file per flush,
// and allocating a fresh buffer each time was most of the garbage (and so of
// the GC pauses) on latency-sensitive runs.
var writeBufs = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, 1<<20) }}

// writeTemp writes a new hidden file in dir through fill, then flushes and
// fsyncs it, so that once it is renamed or linked into place its content is
// already durable. It returns the file's path and size; on error nothing is
// left behind. base only makes the temporary name readable. With a
// trickle, the file goes to the device as it is written (pacedFileWriter)
// and rests after each piece while nobody waits for it: for large files
// written in the background beside flushes that wait for their fsyncs,
// which a roll's file of 32 MiB otherwise held up (docs/benchmarks.md).
func writeTemp(dir, base string, tr *trickle, fill func(io.Writer) error) (path string, size int64, err error) {
	f, err := os.CreateTemp(dir, tmpPrefix+base+"-*")
	if err != nil {
		return "", 0, fmt.Errorf("creating temporary file for %s in %s: %w", base, dir, err)
	}
	path = f.Name()
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(path)
		}
	}()
	var bw *bufio.Writer
	if tr != nil {
		bw = bufio.NewWriterSize(&pacedFileWriter{f: f, trickle: tr}, pacedChunk)
	} else {
		bw = writeBufs.Get().(*bufio.Writer)
		bw.Reset(f)
		defer func() {
			bw.Reset(nil) // drop the file reference before pooling
			writeBufs.Put(bw)
		}()
	}
	cw := &countingWriter{w: bw}
	if err = fill(cw); err != nil {
		return "", 0, fmt.Errorf("writing %s: %w", path, err)
	}
	if err = bw.Flush(); err != nil {
		return "", 0, fmt.Errorf("writing %s: %w", path, err)
	}
	if err = f.Sync(); err != nil {
		return "", 0, fmt.Errorf("syncing %s: %w", path, err)
	}
	if err = f.Close(); err != nil {
		return "", 0, fmt.Errorf("closing %s: %w", path, err)
	}
	return path, cw.n, nil
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// syncDir fsyncs a directory, making the creations, renames and removals
// of entries in it durable. Without it a rename can be lost in a crash even
// though the file's data was synced.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("opening directory %s to sync it: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("syncing directory %s: %w", dir, err)
	}
	return nil
}

// hardLink is os.Link, replaceable so tests can take the fallback path of
// filesystems without hard links.
var hardLink = os.Link

// errTargetExists is wrapped when a file would have been published over a
// different existing file.
var errTargetExists = errors.New("target exists and is a different file")

// linkNoReplace publishes src under dst without ever replacing an existing
// dst, and leaves src in place (the caller removes it, after making dst
// durable, so a crash between the two steps leaves a second name for the same
// file rather than no name at all).
//
// A hard link is the atomic "create dst only if absent" that rename lacks.
// When dst already exists and is the very file src names, an earlier
// attempt got this far before crashing: that counts as success
// (alreadyThere). When it is another file, errTargetExists is returned and
// nothing is touched: overwriting would silently lose rows. On filesystems
// without hard links it falls back to check-then-rename, which is only
// racy against a concurrent publisher of the same name, and then src is gone.
func linkNoReplace(src, dst string) (alreadyThere bool, err error) {
	lerr := hardLink(src, dst)
	if lerr == nil {
		return false, nil
	}
	if errors.Is(lerr, fs.ErrExist) {
		si, serr := os.Lstat(src)
		di, derr := os.Lstat(dst)
		if serr == nil && derr == nil && os.SameFile(si, di) {
			return true, nil
		}
		return false, fmt.Errorf("publishing %s as %s: %w", src, dst, errTargetExists)
	}
	if _, err := os.Lstat(dst); err == nil {
		return false, fmt.Errorf("publishing %s as %s: %w", src, dst, errTargetExists)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return false, fmt.Errorf("publishing %s as %s: %w", src, dst, err)
	}
	if err := os.Rename(src, dst); err != nil {
		return false, fmt.Errorf("publishing %s as %s (hard link failed: %v): %w", src, dst, lerr, err)
	}
	return false, nil
}

// removeTemps removes the temporary files writeTemp left in dir: the
// debris of a process killed between writing a file and publishing it. A
// missing dir holds none.
func removeTemps(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("listing %s: %w", dir, err)
	}
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), tmpPrefix) {
			if err := removeIfExists(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// removeIfExists removes path, treating "already gone" as done: every
// removal here may be a repeat after a crash.
func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing %s: %w", path, err)
	}
	return nil
}

// extOf is the file extension of format, with the dot.
func extOf(f Format) string { return "." + string(f) }

// formatOfName returns the format a data file's name says it holds.
func formatOfName(name string) (Format, bool) {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".parquet":
		return Parquet, true
	case ".csv":
		return CSV, true
	}
	return "", false
}

// pacedChunk is how much of a paced file goes to the device at a time.
const pacedChunk = 256 << 10

// pacedFileWriter writes to its file and waits, write by write, until those
// bytes are on the device. A file of megabytes written in the background
// and left to its final fsync reaches the device in one burst, and the
// small fsyncs that acknowledge flushes queue behind it. The idempotent
// sink's merges write their runs so: recordwise at 100 k rec/s into the
// idempotent sink had a p99 of 6.8–14.6 ms (median 8.5 of eight runs)
// against 4.8–18.3 (6.2) with merges written this way, 256 KiB at a time,
// in the same window (docs/benchmarks.md). The applier's runs are not
// paced: it is what the writers wait for when it falls behind, and pacing
// it cost throughput at 2 M rec/s offered (recordwise at 4 M keys
// 1.54–1.57 M rec/s against 1.63–1.79), where pacing the merges alone cost
// none.
type pacedFileWriter struct {
	f       *os.File
	off     int64
	trickle *trickle // nil: no rest
}

// trickle is a background file's pace: after each piece written, it rests
// backgroundRest times as long as the piece took, so the file takes at
// most a quarter of the device's time, but only while nobody waits for the
// file (waiting) and its writer is ahead (ahead). Resting regardless made
// a recordwise restore after a kill, unpaced at 5 M rec/s, take 0.5–2.1 s
// instead of 0.13–0.45: the dead writer's Close waits for its roll, and at
// that rate the rolls, slowed fourfold on the device, ran behind.
type trickle struct {
	waiting *atomic.Int32
	ahead   func() bool
}

func (t *trickle) rest() bool { return t.waiting.Load() == 0 && t.ahead() }

// backgroundRest: with 3, microbatch at a 10 ms trigger, 1 M rec/s into
// the append sink, had a p99 of 18.7 and 19.2 ms against 29.1 and 20.9
// without rest, in alternating runs (a roll's 32 MiB file reached the
// device as fast as it could, and the batches' small fsyncs queued behind
// it).
const backgroundRest = 3

func (w *pacedFileWriter) Write(b []byte) (int, error) {
	t := time.Now()
	n, err := w.f.Write(b)
	if n > 0 {
		storage.Writeback(w.f, w.off, int64(n), true)
		w.off += int64(n)
	}
	if w.trickle != nil && w.trickle.rest() {
		time.Sleep(backgroundRest * time.Since(t))
	}
	return n, err
}
