package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/outdir"
	"github.com/rewind-engine/rewind/dataflow/runrecord"
	"github.com/rewind-engine/rewind/dataflow/sink"
)

// resolveFlags are rewind resolve's flags, as given.
type resolveFlags struct {
	out, format, jobName, maxMemory, summary string
}

// newResolveCmd resolves an output directory: one row per write key, the
// greatest _version, with the duplicates and conflicts counted, in bounded
// memory. The job's layout (which columns are the write key) comes from the
// directory's run record, or from --job for an output written without one.
func newResolveCmd(stdout, stderr io.Writer) *cobra.Command {
	var f resolveFlags
	cmd := &cobra.Command{
		Use:   "resolve DIR",
		Short: "Resolve an output directory by write key, count its duplicates, and write the resolved table",
		Long: `resolve reads every visible data file of an output directory, keeps for each
write key the row with the greatest _version, and prints what it found:
files, visible rows, resolved rows, duplicate and conflicting rows (the same
counts rewind run's summary reports). With --out it writes the resolved rows,
in write-key order, to one Parquet or CSV file.

Memory stays within --max-memory whatever the output's size: rows beyond it
are sorted and spilled to the temporary directory ($TMPDIR), then merged.`,
		Example: `  rewind resolve rewind-out
  rewind resolve rewind-out --out resolved.parquet
  rewind resolve rewind-out --out resolved.txt --format csv --max-memory 256MiB
  rewind resolve ref-out --job keyed-count      # an output without a run record (the reference's)`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return f.resolve(args[0], stdout, stderr)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.out, "out", "", "write the resolved rows to FILE (format from --format or the file's extension)")
	fl.StringVar(&f.format, "format", "", "format of --out: parquet, csv (default: from the extension of --out)")
	fl.StringVar(&f.jobName, "job", "", "the job that wrote DIR, for an output with no run record: "+strings.Join(job.Names(), ", "))
	fl.StringVar(&f.maxMemory, "max-memory", "32MiB", "rows held in memory before sorted runs spill to disk, such as 64MiB or 1GB")
	fl.StringVar(&f.summary, "summary", "text", "summary format: text, json")
	return cmd
}

// resolveSummary is what resolve prints with --summary json.
type resolveSummary struct {
	Dir             string `json:"dir"`
	Files           int    `json:"files"`
	VisibleRows     int64  `json:"visible_rows"`
	ResolvedRows    int64  `json:"resolved_rows"`
	DuplicateRows   int64  `json:"duplicate_rows"`
	ConflictingRows int64  `json:"conflicting_rows"`
	SpilledRuns     int    `json:"spilled_runs"`
	Out             string `json:"out,omitempty"`
	Format          string `json:"format,omitempty"`
	Incomplete      bool   `json:"incomplete"`
}

func (f *resolveFlags) resolve(dir string, stdout, stderr io.Writer) error {
	budget, err := parseSize("--max-memory", f.maxMemory)
	if err != nil {
		return err
	}
	if f.summary != "text" && f.summary != "json" {
		return usagef("invalid --summary %q: allowed are text, json", f.summary)
	}
	format, err := f.outFormat()
	if err != nil {
		return err
	}
	if err := checkOutOutside(f.out, dir); err != nil {
		return err
	}
	layout, err := f.layoutOf(dir)
	if err != nil {
		return err
	}
	// A run still writing dir would change it under the reader; the lock
	// also keeps one from starting until the counts are taken.
	unlock, err := outdir.Lock(dir)
	if errors.Is(err, outdir.ErrLocked) {
		return fmt.Errorf("output directory %s is in use by a running rewind process (%s holds its lock): resolve it once the run has ended", dir, outdir.LockName)
	}
	if err == nil {
		defer unlock()
	} // else a read-only directory: nobody can be writing it through rewind
	_, ierr := os.Stat(filepath.Join(dir, outdir.IncompleteName))
	incomplete := ierr == nil
	if incomplete {
		fmt.Fprintf(stderr, "rewind: note: %s is marked incomplete (%s says why): the counts are of what it holds now\n", dir, filepath.Join(dir, outdir.IncompleteName))
	}
	opt := sink.ResolveOptions{MemoryBudget: budget}
	var st sink.Stats
	if f.out == "" {
		st, err = sink.ResolveEach(dir, layout, opt, nil)
	} else {
		st, err = writeResolvedFile(f.out, dir, layout, opt, format)
	}
	if err != nil {
		return err
	}
	s := resolveSummary{Dir: dir, Files: st.Files, VisibleRows: st.VisibleRows, ResolvedRows: st.ResolvedRows,
		DuplicateRows: st.DuplicateRows, ConflictingRows: st.ConflictingRows, SpilledRuns: st.SpilledRuns, Incomplete: incomplete}
	if f.out != "" {
		s.Out, s.Format = f.out, string(format)
	}
	if f.summary == "json" {
		return json.NewEncoder(stdout).Encode(s)
	}
	return s.writeText(stdout)
}

// parseSize reads a memory budget such as 64MiB or 1GB for flag.
func parseSize(flag, v string) (int64, error) {
	b, err := humanize.ParseBytes(v)
	if err != nil || b == 0 || b > 1<<50 {
		return 0, usagef("invalid %s %q: want a size such as 64MiB, 512MB or 2GiB", flag, v)
	}
	return int64(b), nil
}

func (s resolveSummary) writeText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "resolved %s: %d files, %d visible rows, %d after resolving (%d duplicate, %d conflicting)\n",
		s.Dir, s.Files, s.VisibleRows, s.ResolvedRows, s.DuplicateRows, s.ConflictingRows)
	if s.SpilledRuns > 0 {
		fmt.Fprintf(&b, "  sorted in %d runs spilled to disk (the rows exceeded --max-memory)\n", s.SpilledRuns)
	}
	if s.Out != "" {
		fmt.Fprintf(&b, "  wrote %d rows to %s (%s)\n", s.ResolvedRows, s.Out, s.Format)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// outFormat is --out's format: --format, or the extension of --out.
func (f *resolveFlags) outFormat() (sink.Format, error) {
	if f.out == "" {
		if f.format != "" {
			return "", usagef("invalid --format %s: it applies to --out; give --out FILE too", f.format)
		}
		return "", nil
	}
	if f.format != "" {
		format, err := sink.ParseFormat(f.format)
		if err != nil {
			return "", usagef("invalid --format %q: allowed are parquet, csv", f.format)
		}
		return format, nil
	}
	ext := strings.ToLower(strings.TrimPrefix(filepath.Ext(f.out), "."))
	format, err := sink.ParseFormat(ext)
	if err != nil {
		return "", usagef("invalid --out %s: cannot tell the format from its extension; name it .parquet or .csv, or give --format", f.out)
	}
	return format, nil
}

// checkOutOutside refuses an --out that would become part of dir's output:
// a visible file at its top level is read as rows by every later reader.
func checkOutOutside(out, dir string) error {
	if out == "" {
		return nil
	}
	od, err1 := filepath.Abs(filepath.Dir(out))
	dd, err2 := filepath.Abs(dir)
	name := filepath.Base(out)
	if err1 == nil && err2 == nil && od == dd && !strings.HasPrefix(name, "_") && !strings.HasPrefix(name, ".") {
		return usagef("invalid --out %s: it is inside the output directory %s, where it would be read as output; write it elsewhere", out, dir)
	}
	return nil
}

// layoutOf is the layout of the job that wrote dir: --job's, or the one its
// run record names.
func (f *resolveFlags) layoutOf(dir string) (sink.Layout, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return sink.Layout{}, fmt.Errorf("cannot resolve %s: %w", dir, errors.Unwrap(err))
	}
	if !fi.IsDir() {
		return sink.Layout{}, fmt.Errorf("cannot resolve %s: not a directory (give the --output directory of a run)", dir)
	}
	name, params := f.jobName, job.DefaultParams
	if name != "" {
		if !isJob(name) {
			return sink.Layout{}, usagef("invalid --job %q: allowed are %s", name, strings.Join(job.Names(), ", "))
		}
	} else {
		rec, err := runrecord.Read(dir)
		var de runrecord.DamagedError
		switch {
		case errors.Is(err, runrecord.ErrNotFound):
			return sink.Layout{}, fmt.Errorf("cannot resolve %s: not a rewind output directory (it holds no %s); for an output written without one, such as the reference executor's, give --job", dir, runrecord.FileName)
		case errors.As(err, &de):
			return sink.Layout{}, fmt.Errorf("cannot resolve %s: run record %s is damaged (%s), so it no longer says which job wrote the output; give --job to resolve it anyway", dir, de.Path, de.Why)
		case err != nil:
			return sink.Layout{}, fmt.Errorf("cannot resolve %s: %w", dir, err)
		}
		name, params = rec.Job, rec.Params
	}
	j, err := job.Build(name, params)
	if err != nil {
		return sink.Layout{}, fmt.Errorf("cannot resolve %s: job %s: %w", dir, name, err)
	}
	return j.Output, nil
}

func isJob(name string) bool {
	for _, n := range job.Names() {
		if n == name {
			return true
		}
	}
	return false
}

// writeResolvedFile writes the resolved table to path atomically: into a
// hidden file beside it, synced, then renamed, so a failure leaves no
// half-written table under the name asked for.
func writeResolvedFile(path, dir string, layout sink.Layout, opt sink.ResolveOptions, format sink.Format) (sink.Stats, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return sink.Stats{}, fmt.Errorf("writing --out %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // after the rename, there is nothing to remove
	// CreateTemp makes the file private; the table is an ordinary output.
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return sink.Stats{}, fmt.Errorf("writing --out %s: %w", path, err)
	}
	bw := bufio.NewWriterSize(tmp, 1<<20)
	st, err := sink.WriteResolved(dir, layout, opt, format, bw)
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return sink.Stats{}, err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return sink.Stats{}, fmt.Errorf("writing --out %s: %w", path, err)
	}
	return st, nil
}
