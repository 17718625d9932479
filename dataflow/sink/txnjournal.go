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
	"sync"
)

// The transactional sink's journal (see journal.go): Flush records an entry
// for every staged file before it returns, so every epoch a complete
// recovery point covers has its entries in durable storage. The entries
// keep one invariant that lets a missing file be told from a published one:
// an entry of an epoch a recovery point covers names a file that is staged,
// or that was published under its visible name (its flush returned, so the
// file was staged; a staged file is removed only after its entry is
// deleted, and before a file is published every other entry for its
// visible name is deleted). So once published, a visible name has exactly
// one entry, which says what it holds. Entries of newer epochs may name a
// file a crash kept from being staged; Recover drops those.

// refuseHint ends every refusal: what a damaged destination leaves a user
// to do. Rows a complete recovery point covers are not produced again, so
// a resumed run cannot make up for them.
const refuseHint = "its rows are not produced again after the recovery point that covers them; rerun without --resume into a fresh output directory (or with --overwrite)"

// Attach implements Attacher: it reads the run's staged entries. The
// directory is compared with them at the next Recover.
func (s *txnSink) Attach(j *Journal) error {
	entries, err := j.loadStaged()
	if err != nil {
		return err
	}
	s.commitMu.Lock()
	defer s.commitMu.Unlock()
	s.entMu.Lock()
	defer s.entMu.Unlock()
	s.journal, s.checked = j, false
	s.entries, s.byVisible = map[string]stagedEntry{}, map[string]map[string]struct{}{}
	for _, e := range entries {
		s.addEntryLocked(e)
	}
	return nil
}

// record makes the entries of files Flush just staged durable.
func (s *txnSink) record(entries []stagedEntry) error {
	if s.journal == nil {
		return nil
	}
	var wg sync.WaitGroup
	errs := make([]error, len(entries))
	for i, e := range entries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.journal.put(stagedEntryDir+e.File, encodeStagedEntry(e))
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	s.entMu.Lock()
	for _, e := range entries {
		s.addEntryLocked(e)
	}
	s.entMu.Unlock()
	return nil
}

func (s *txnSink) addEntryLocked(e stagedEntry) {
	s.entries[e.File] = e
	v := e.file().visibleName()
	if s.byVisible[v] == nil {
		s.byVisible[v] = map[string]struct{}{}
	}
	s.byVisible[v][e.File] = struct{}{}
}

// forget deletes the entry of a staged file about to be removed.
func (s *txnSink) forget(name string) error {
	if s.journal == nil {
		return nil
	}
	s.entMu.Lock()
	_, ok := s.entries[name]
	s.entMu.Unlock()
	if !ok {
		return nil
	}
	if err := s.journal.del(stagedEntryDir + name); err != nil {
		return err
	}
	s.entMu.Lock()
	if e, ok := s.entries[name]; ok {
		delete(s.entries, name)
		delete(s.byVisible[e.file().visibleName()], name)
	}
	s.entMu.Unlock()
	return nil
}

// vgroup is everything about one visible name: the files staged for it
// (attempts of one epoch, subtask and part, in attempt order) and the
// journal's entries for it.
type vgroup struct {
	visible string
	epoch   int64
	staged  []stagedFile
	entries []stagedEntry
}

// groups gathers the staged files of epochs <= upTo and their entries by
// visible name, in commit order; with all, also the visible names that
// only have entries (any epoch).
func (s *txnSink) groups(files []stagedFile, upTo int64, all bool) []*vgroup {
	by := map[string]*vgroup{}
	get := func(f stagedFile) *vgroup {
		v := f.visibleName()
		g := by[v]
		if g == nil {
			g = &vgroup{visible: v, epoch: f.epoch}
			by[v] = g
		}
		return g
	}
	for _, f := range files { // already in (epoch, subtask, attempt, part) order
		if f.epoch <= upTo {
			g := get(f)
			g.staged = append(g.staged, f)
		}
	}
	s.entMu.Lock()
	if all {
		for _, e := range s.entries {
			g := get(e.file())
			g.entries = append(g.entries, e)
		}
	} else {
		for v, g := range by {
			for name := range s.byVisible[v] {
				g.entries = append(g.entries, s.entries[name])
			}
		}
	}
	s.entMu.Unlock()
	out := make([]*vgroup, 0, len(by))
	for _, g := range by {
		slices.SortFunc(g.entries, func(a, b stagedEntry) int { return cmp.Compare(a.File, b.File) })
		out = append(out, g)
	}
	slices.SortFunc(out, func(a, b *vgroup) int {
		return cmp.Or(cmp.Compare(a.epoch, b.epoch), cmp.Compare(a.visible, b.visible))
	})
	return out
}

// publish makes the newest staged attempt of g visible, after checking it
// against its entry; older attempts' files are dropped (they would be
// replaced anyway). Every staged file present comes from one process's
// attempts (a resumed process recovers the staging directory before it
// stages anything), so attempt order is staging order.
func (s *txnSink) publish(g *vgroup) error {
	win := g.staged[len(g.staged)-1]
	if s.journal != nil {
		var e *stagedEntry
		for i := range g.entries {
			if g.entries[i].File == win.name {
				e = &g.entries[i]
			}
		}
		if e == nil {
			// Name the missing entry too: it, not the file, may be what
			// was deleted.
			return fmt.Errorf("staged file %s of epoch %d is not in the run's record of its destination (no entry %s), so nothing vouches for its rows: it is not published; remove it if it is not this run's, or rerun without --resume into a fresh output directory",
				filepath.Join(s.staging, win.name), win.epoch, s.journal.name(stagedEntryDir+win.name))
		}
		if err := s.verify(filepath.Join(s.staging, win.name), *e, "staged file", "it is not published"); err != nil {
			return err
		}
		for _, o := range g.entries {
			if o.File != win.name {
				if err := s.forget(o.File); err != nil {
					return err
				}
			}
		}
	}
	for _, f := range g.staged[:len(g.staged)-1] {
		if err := s.forget(f.name); err != nil {
			return err
		}
		if err := removeIfExists(filepath.Join(s.staging, f.name)); err != nil {
			return err
		}
	}
	if err := s.step("publish", win.name); err != nil {
		return err
	}
	if err := os.Rename(filepath.Join(s.staging, win.name), filepath.Join(s.dir, g.visible)); err != nil {
		return fmt.Errorf("publishing staged %s: %w", win.name, err)
	}
	return nil
}

// verify checks that the file at path holds what e says.
func (s *txnSink) verify(path string, e stagedEntry, what, outcome string) error {
	size, sum, err := fileCRC(path)
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s %s of committed epoch %d is missing (the run's record of its destination says it holds %s): %s",
			what, path, e.Epoch, e.holds(), refuseHint)
	}
	if err != nil {
		return fmt.Errorf("checking %s %s: %w", what, path, err)
	}
	if size != e.Size || sum != e.CRC32C {
		return fmt.Errorf("%s %s of epoch %d is damaged: it has %d bytes, crc32c %08x, but the run's record of its destination says %s; %s; %s",
			what, path, e.Epoch, size, sum, e.holds(), outcome, refuseHint)
	}
	return nil
}

func fileCRC(path string) (int64, uint32, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	h := crc32.New(castagnoli)
	n, err := io.Copy(h, f)
	return n, h.Sum32(), err
}

// checkPublished compares, once per process, what is visible with the
// journal, after the staged epochs <= complete were published: every
// visible name with entries and no staged file left must exist with the
// size its entry says (a stat each; contents are checked where they are
// read back, PublishedAfter). Entries of epochs > complete whose file is
// gone were never covered by a recovery point; they are dropped, as their
// rows are produced again.
func (s *txnSink) checkPublished(complete int64) error {
	if s.journal == nil || s.checked {
		return nil
	}
	files, _, err := s.list()
	if err != nil {
		return err
	}
	for _, g := range s.groups(files, complete, true) {
		if len(g.staged) > 0 || len(g.entries) == 0 {
			continue
		}
		if g.epoch > complete && stagedAny(files, g.visible) {
			continue // discarded next
		}
		path := filepath.Join(s.dir, g.visible)
		fi, err := os.Stat(path)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("checking published %s: %w", path, err)
		}
		matched := false // some entry can be what is visible
		for _, e := range g.entries {
			matched = matched || fi != nil && fi.Size() == e.Size
		}
		if matched {
			continue
		}
		if g.epoch > complete {
			for _, e := range g.entries {
				if err := s.forget(e.File); err != nil {
					return err
				}
			}
			continue
		}
		e := g.entries[len(g.entries)-1]
		if fi == nil {
			// Staged then deleted, or published then deleted: from
			// here the two look the same.
			return fmt.Errorf("the file of committed epoch %d is missing: neither staged as %s nor published as %s (the run's record of its destination says it holds %s): %s",
				e.Epoch, filepath.Join(s.staging, e.File), path, e.holds(), refuseHint)
		}
		return fmt.Errorf("published file %s of committed epoch %d is damaged: it has %d bytes, but the run's record of its destination says %s: %s",
			path, e.Epoch, fi.Size(), e.holds(), refuseHint)
	}
	s.checked = true
	return nil
}

// stagedAny reports whether any file of a visible name is staged (of any
// epoch, unlike vgroup.staged, which holds only those due).
func stagedAny(files []stagedFile, visible string) bool {
	for _, f := range files {
		if f.visibleName() == visible {
			return true
		}
	}
	return false
}

// entryOfVisible returns the entry a published file must match, if the
// journal has exactly one for its name.
func (s *txnSink) entryOfVisible(name string) (stagedEntry, bool) {
	if s.journal == nil {
		return stagedEntry{}, false
	}
	s.entMu.Lock()
	defer s.entMu.Unlock()
	names := s.byVisible[name]
	if len(names) != 1 {
		return stagedEntry{}, false
	}
	for n := range names {
		return s.entries[n], true
	}
	return stagedEntry{}, false
}
