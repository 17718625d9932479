package outdir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/rewind-engine/rewind/dataflow/storage"
)

// IncompleteName is the marker file of an output directory whose run has
// not completed it: written before the run's first output, rewritten with
// the reason when the run fails or is interrupted, and removed only once
// the output is complete (by that run, or by the --resume that finishes
// it). Rows in an append output are visible as they are written, so
// without the marker a run that failed late would leave an output that
// looks whole. Like every name starting with "_" it is not output:
// resolution and file: inputs skip it, and --overwrite clears it.
const IncompleteName = "_INCOMPLETE"

// Incomplete says why an output is incomplete and what to do about it.
type Incomplete struct {
	RunID  string // empty for the reference, which keeps no run record
	Reason string // one line
	// Resumable: the run's inputs can be re-read, so --resume can finish
	// the output once the cause is dealt with.
	Resumable bool
}

// Text is the marker's content.
func (m Incomplete) Text(dir string) string {
	var b strings.Builder
	b.WriteString("This output is incomplete: the rewind run writing it has not finished.\n")
	if m.RunID != "" {
		fmt.Fprintf(&b, "Run:    %s\n", m.RunID)
	}
	fmt.Fprintf(&b, "Why:    %s\n", oneLine(m.Reason))
	fmt.Fprintf(&b, "When:   %s\n", time.Now().UTC().Format(time.RFC3339))
	switch {
	case m.RunID != "" && m.Resumable:
		fmt.Fprintf(&b, "To do:  once the cause is dealt with, run the same command with --resume %s to complete this output in place (this file is then removed), or --overwrite to start again in %s.\n", m.RunID, dir)
	default:
		fmt.Fprintf(&b, "To do:  run the job again with --overwrite (or into another --output); this output cannot be completed in place.\n")
	}
	return b.String()
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// MarkIncomplete writes m into dir as IncompleteName, atomically.
func MarkIncomplete(dir string, m Incomplete) error {
	tmp, err := os.CreateTemp(dir, ".rewind-incomplete-*")
	if err != nil {
		return fmt.Errorf("marking output incomplete: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the rename, a no-op
	_, err = tmp.WriteString(m.Text(dir))
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), filepath.Join(dir, IncompleteName))
	}
	if err == nil {
		err = storage.SyncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("marking output incomplete: %w", err)
	}
	return nil
}

// ClearIncomplete removes the marker from dir once its output is complete.
func ClearIncomplete(dir string) error {
	err := os.Remove(filepath.Join(dir, IncompleteName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err == nil {
		err = storage.SyncDir(dir)
	}
	if err != nil {
		return fmt.Errorf("removing %s: %w", IncompleteName, err)
	}
	return nil
}
