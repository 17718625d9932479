package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/spf13/cobra"

	"github.com/rewind-engine/rewind/bench"
)

// newBenchCompareCmd is `rewind bench compare OLD NEW`.
func newBenchCompareCmd(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "compare OLD/results.json NEW/results.json",
		Short: "Put two bench runs side by side, figure by figure, with NEW/OLD ratios",
		Long: `compare reads the results.json of two rewind bench runs (before and after a
change, say) and prints, for every contestant and sweep point both have, each
figure as median (min–max) in OLD and NEW and the ratio of the medians. It
says first how the two scenarios or machines differ, if they do.

Exit status 2 when an argument is not a readable results.json of this
version or the two share no contestant; 1 when reading fails otherwise.`,
		Example: `  rewind bench --out before && (make a change) && rewind bench --out after
  rewind bench compare before/results.json after/results.json`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			old, err := readResults(args[0])
			if err != nil {
				return err
			}
			new, err := readResults(args[1])
			if err != nil {
				return err
			}
			c, err := bench.Compare(old, new)
			if errors.Is(err, bench.ErrNothingInCommon) {
				return usageError{err}
			}
			if err != nil {
				return err
			}
			return c.WriteText(stdout, args[0], args[1])
		},
	}
}

// readResults reads one argument of compare. A path that names nothing,
// a directory, or a file that is not a results.json of this version is
// the user's to fix (exit 2); another read error is not (exit 1).
func readResults(path string) (*bench.Results, error) {
	if st, err := os.Stat(path); err == nil && st.IsDir() {
		return nil, usagef("%s is a directory; give its results.json", path)
	}
	r, err := bench.ReadResults(path)
	var fe *bench.FormatError
	switch {
	case errors.As(err, &fe):
		return nil, usageError{err}
	case errors.Is(err, fs.ErrNotExist):
		return nil, usagef("cannot read %s: no such file", path)
	case err != nil:
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("cannot read %s: %w", path, err)
	}
	return r, nil
}
