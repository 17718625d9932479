package sink

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
)

// The idempotent store is a set of sorted runs (idemrun.go) and a
// manifest, IdempotentStore, naming them oldest first. The applier writes
// each batch of log frames as one new run; a background merger combines
// runs of similar size into one, so a row is rewritten about log4(store
// / batch) times, instead of every page a batch touches being rewritten
// as in a B+tree. Among the rows of one key the greatest version wins and,
// of equal versions, the newest run's: what applying the rows one after
// another in log order would leave.
//
// The manifest (magic, the layout, the store's id, the last log frame the
// runs hold, the next run number, each run's number, rows, size and
// CRC32C, then a CRC32C of all that) is replaced by rename, so a crash
// leaves the old or the new set of runs whole; runs it does not name are
// debris of such a crash and removed on open.

var idemManifestMagic = []byte("RWIDMAN1")

type manifest struct {
	layout  []byte
	id      string
	applied int64 // the last log frame the runs hold
	nextRun int64
	runs    []runMeta // oldest first
}

func (m *manifest) encode() []byte {
	b := append([]byte(nil), idemManifestMagic...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(m.layout)))
	b = append(b, m.layout...)
	b = append(b, m.id...)
	b = binary.BigEndian.AppendUint64(b, uint64(m.applied))
	b = binary.BigEndian.AppendUint64(b, uint64(m.nextRun))
	b = binary.BigEndian.AppendUint32(b, uint32(len(m.runs)))
	for _, r := range m.runs {
		b = binary.BigEndian.AppendUint64(b, uint64(r.num))
		b = binary.BigEndian.AppendUint64(b, uint64(r.rows))
		b = binary.BigEndian.AppendUint64(b, uint64(r.size))
		b = binary.BigEndian.AppendUint32(b, r.crc)
	}
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

func decodeManifest(b []byte) (manifest, error) {
	var m manifest
	if len(b) < 8+4 || !bytes.Equal(b[:8], idemManifestMagic) {
		return m, errors.New("it is not a manifest of sorted runs (a store written by an older rewind, or damaged)")
	}
	if crc32.Checksum(b[:len(b)-4], castagnoli) != binary.BigEndian.Uint32(b[len(b)-4:]) {
		return m, errors.New("it fails its checksum")
	}
	b = b[8 : len(b)-4]
	n := int(binary.BigEndian.Uint32(b))
	const fixed = 32 + 8 + 8 + 4
	if n > len(b)-4-fixed {
		return m, errors.New("its layout runs past its end")
	}
	m.layout, b = b[4:4+n], b[4+n:]
	m.id = string(b[:32])
	m.applied = int64(binary.BigEndian.Uint64(b[32:]))
	m.nextRun = int64(binary.BigEndian.Uint64(b[40:]))
	nr := int(binary.BigEndian.Uint32(b[48:]))
	b = b[fixed:]
	const per = 8 + 8 + 8 + 4
	if len(b) != nr*per {
		return m, fmt.Errorf("it names %d runs in %d bytes", nr, len(b))
	}
	for i := range nr {
		e := b[i*per:]
		r := runMeta{num: int64(binary.BigEndian.Uint64(e)), rows: int64(binary.BigEndian.Uint64(e[8:])),
			size: int64(binary.BigEndian.Uint64(e[16:])), crc: binary.BigEndian.Uint32(e[24:])}
		if r.num <= 0 || r.num >= m.nextRun || r.rows <= 0 || (i > 0 && r.num == m.runs[i-1].num) {
			return m, fmt.Errorf("its run %d is numbered %d with %d rows (next run %d)", i, r.num, r.rows, m.nextRun)
		}
		m.runs = append(m.runs, r)
	}
	if !validStoreID(m.id) || m.applied < 0 {
		return m, errors.New("its id or last frame is not one a store is given")
	}
	return m, nil
}

// runStore is the store's runs and manifest, safe for the applier, the
// merger and the export to use at once.
type runStore struct {
	dir, path              string // path: the manifest
	id                     string // man.id, fixed once open
	rowLen, keyLen, verOff int

	mu  sync.Mutex // man
	man manifest

	// mergeMu is held for a whole merge and for an export, which reads
	// runs a merge would remove.
	mergeMu sync.Mutex
	wake    chan struct{}
	stop    chan struct{}
	done    chan struct{}
	fail    func(error) // the merger failed: the store is not used again
	merged  int64       // rows the merger wrote, for tests and figures
}

// runFanIn is how many runs of one size class a merge combines; runs
// below runClassBase bytes are one class. Variables so tests merge often.
var (
	runFanIn           = 4
	runClassBase int64 = 4 << 20
)

// sizeClass groups runs by size: base, base*fanIn, base*fanIn²...
func sizeClass(size int64) int {
	c := 0
	for lim := runClassBase; size >= lim; lim *= int64(runFanIn) {
		c++
	}
	return c
}

// pickMerge returns the start of the newest runs to merge: the runs at the
// end no larger than the newest one's class, when there are fanIn of them.
func pickMerge(runs []runMeta) (int, bool) {
	n := len(runs)
	if n < 2 {
		return 0, false
	}
	c, i := sizeClass(runs[n-1].size), n-1
	for i > 0 && sizeClass(runs[i-1].size) <= c {
		i--
	}
	return i, n-i >= runFanIn
}

// writeManifest makes m the store's manifest, durable (with the runs it
// names, in the same directory) when it returns.
func (st *runStore) writeManifest(m manifest) error {
	b := m.encode()
	tmp, _, err := writeTemp(st.dir, "idempotent-manifest", nil, func(w io.Writer) error { _, err := w.Write(b); return err })
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, st.path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("replacing manifest %s: %w", st.path, err)
	}
	return syncDir(st.dir)
}

// removeOrphans deletes the runs the manifest does not name.
func (st *runStore) removeOrphans() error {
	entries, err := os.ReadDir(st.dir)
	if err != nil {
		return err
	}
	live := map[int64]bool{}
	for _, r := range st.man.runs {
		live[r.num] = true
	}
	for _, e := range entries {
		if n, ok := runNumber(e.Name()); ok && !live[n] {
			if err := removeIfExists(filepath.Join(st.dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

// add writes sorted, one-per-key rows as the newest run holding log
// frames through applied, and records it in the manifest.
func (st *runStore) add(rows func(emit func([]byte) error) error, applied int64) error {
	st.mu.Lock()
	num := st.man.nextRun
	st.man.nextRun++
	st.mu.Unlock()
	w, err := createRun(st.dir, st.id, num, st.rowLen, false)
	if err != nil {
		return err
	}
	if err := rows(w.add); err != nil {
		w.abort()
		return err
	}
	meta, err := w.done()
	if err != nil {
		return err
	}
	st.mu.Lock()
	m := st.man
	m.runs = append(slices.Clip(m.runs), meta)
	m.applied = applied
	err = st.writeManifest(m)
	if err == nil {
		st.man = m
	}
	st.mu.Unlock()
	if err == nil {
		signal(st.wake)
	}
	return err
}

// rowsAtLeast is a lower bound of the keys the store holds that never
// falls: a merged run holds at least the keys of each run it replaces.
func (st *runStore) rowsAtLeast() int64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	var n int64
	for _, r := range st.man.runs {
		n = max(n, r.rows)
	}
	return n
}

func (st *runStore) applied() int64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.man.applied
}

// mergeInto reads runs (oldest first) as one sorted stream: each key once,
// its greatest version, of equal versions the newest run's row.
func (st *runStore) mergeInto(runs []runMeta, bufSize int, emit func([]byte) error) error {
	rs := make([]*runReader, 0, len(runs))
	defer func() {
		for _, r := range rs {
			r.close()
		}
	}()
	heads := make([][]byte, len(runs))
	for i, m := range runs {
		r, err := openRun(st.dir, st.id, m, st.rowLen, st.keyLen, bufSize)
		if err != nil {
			return err
		}
		rs = append(rs, r)
		if heads[i], err = r.next(); err != nil {
			return err // a listed run has at least one row
		}
	}
	ver := func(row []byte) int64 { return int64(binary.BigEndian.Uint64(row[st.verOff:])) }
	key := make([]byte, 0, st.keyLen)
	for {
		best := -1
		for i, h := range heads {
			if h == nil {
				continue
			}
			if best < 0 {
				best = i
				continue
			}
			switch c := bytes.Compare(h[:st.keyLen], heads[best][:st.keyLen]); {
			case c < 0:
				best = i
			case c == 0 && ver(h) >= ver(heads[best]):
				best = i // runs go oldest first: a newer equal version wins
			}
		}
		if best < 0 {
			return nil
		}
		if err := emit(heads[best]); err != nil {
			return err
		}
		key = append(key[:0], heads[best][:st.keyLen]...)
		for i, h := range heads {
			if h == nil || !bytes.Equal(h[:st.keyLen], key) {
				continue
			}
			var err error
			if heads[i], err = rs[i].next(); err == io.EOF {
				heads[i] = nil
			} else if err != nil {
				return err
			}
		}
	}
}

// errMergeStopped ends a merge cut short by close.
var errMergeStopped = errors.New("merge stopped")

func (st *runStore) startMerger() {
	st.wake, st.stop, st.done = make(chan struct{}, 1), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(st.done)
		for {
			select {
			case <-st.wake:
			case <-st.stop:
				return
			}
			for {
				did, err := st.mergeOnce(st.stop)
				if errors.Is(err, errMergeStopped) {
					return
				}
				if err != nil {
					st.fail(err)
					return
				}
				if !did {
					break
				}
			}
		}
	}()
}

// stopMerger ends the merger, cutting a merge short (its run is never
// named, and removed).
func (st *runStore) stopMerger() {
	if st.stop == nil {
		return
	}
	select {
	case <-st.stop:
	default:
		close(st.stop)
	}
	<-st.done
}

// mergeOnce merges the runs pickMerge chooses, if any, into one run that
// takes their place; stop cuts it short.
func (st *runStore) mergeOnce(stop <-chan struct{}) (bool, error) {
	st.mergeMu.Lock()
	defer st.mergeMu.Unlock()
	st.mu.Lock()
	lo, ok := pickMerge(st.man.runs)
	runs := slices.Clone(st.man.runs[lo:])
	num := st.man.nextRun
	if ok {
		st.man.nextRun++
	}
	st.mu.Unlock()
	if !ok {
		return false, nil
	}
	w, err := createRun(st.dir, st.id, num, st.rowLen, true)
	if err != nil {
		return false, err
	}
	n := 0
	err = st.mergeInto(runs, 256<<10, func(row []byte) error {
		// A merge is background work: it yields the processor now and
		// then, as a roll does (yieldEach).
		if n++; n%(1<<12) == 0 {
			runtime.Gosched()
		}
		if n%(1<<16) == 0 {
			select {
			case <-stop:
				return errMergeStopped
			default:
			}
		}
		return w.add(row)
	})
	if err != nil {
		w.abort()
		return false, err
	}
	meta, err := w.done()
	if err != nil {
		return false, err
	}
	st.mu.Lock()
	m := st.man
	// Only the applier changed the list meanwhile, appending after them.
	m.runs = slices.Concat(m.runs[:lo], []runMeta{meta}, m.runs[lo+len(runs):])
	err = st.writeManifest(m)
	if err == nil {
		st.man = m
		st.merged += meta.rows
	}
	st.mu.Unlock()
	if err != nil {
		return false, err
	}
	for _, r := range runs {
		if err := removeIfExists(filepath.Join(st.dir, runName(r.num))); err != nil {
			return false, err
		}
	}
	return true, nil
}

// each reads the whole store in key order, one row per key, holding off
// merges meanwhile.
func (st *runStore) each(emit func([]byte) error) error {
	st.mergeMu.Lock()
	defer st.mergeMu.Unlock()
	st.mu.Lock()
	runs := slices.Clone(st.man.runs)
	st.mu.Unlock()
	if len(runs) == 0 {
		return nil
	}
	return st.mergeInto(runs, 256<<10, emit)
}

// readManifest reads the store's manifest; present is false when there is
// none or it is empty (a new store).
func readManifest(path string) (m manifest, present bool, err error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) || err == nil && len(b) == 0 {
		return m, false, nil
	}
	if err != nil {
		return m, false, err
	}
	m, err = decodeManifest(b)
	return m, true, err
}
