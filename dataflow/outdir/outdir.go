// Package outdir is an output directory's own bookkeeping, beside the rows
// a sink writes there: the lock that keeps a second process out, the
// _INCOMPLETE marker of an output whose run has not completed it, and the
// checks and clearing that decide whether a run may write there.
package outdir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/rewind-engine/rewind/dataflow/runrecord"
)

// LockName is the file Lock locks in an output directory. It
// is not output: InUse and Clear leave it alone.
const LockName = "_rewind-run.lock"

// ErrLocked is Lock's error when another process holds the
// lock.
var ErrLocked = errors.New("output directory is in use by another rewind process")

// InUse reports whether dir already holds files, visible or not,
// besides the lock file.
func InUse(dir string) (bool, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading output directory: %w", err)
	}
	for _, e := range entries {
		if e.Name() != LockName {
			return true, nil
		}
	}
	return false, nil
}

// Clear removes everything inside dir (not dir itself) but the lock
// file, which the caller may hold.
func Clear(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name() == LockName {
			continue
		}
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// BusyError is an output directory that already holds files when
// --overwrite was not given.
type BusyError struct{ Dir string }

func (e BusyError) Error() string {
	if rec, err := runrecord.Read(e.Dir); err == nil && rec.Finished == nil {
		return fmt.Sprintf("output directory %s holds the output of run %s, which did not finish: --resume continues it, --overwrite clears it, or choose another --output", e.Dir, rec.RunID)
	}
	return fmt.Sprintf("output directory %s is not empty: choose another --output or pass --overwrite to clear it", e.Dir)
}
