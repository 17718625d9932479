package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/mistake"
	"github.com/rewind-engine/rewind/dataflow/sink"
	"github.com/rewind-engine/rewind/dataflow/source"
	"github.com/rewind-engine/rewind/dataflow/spacetime"
)

// What the destination lessons (append-after-replay, forgetful-source)
// share: they run the etl job, whose every record becomes one output row
// keyed by its id, so a row published twice or never is a record named by
// its id.

// destinationJob is the job the destination lessons run.
const destinationJob = "etl"

// useDestinationJob sets the etl job unless --job named another, which
// it refuses: with a keyed job a replayed record changes a count, and the
// difference could not be named record by record.
func (c *classroom) useDestinationJob(n mistake.Name) error {
	if c.fl.Changed("job") && c.f.job != destinationJob {
		return usagef("invalid --job %q for --teach %s: the lesson runs the %s job (one row per record, named by its id)", c.f.job, n, destinationJob)
	}
	c.f.job = destinationJob
	return nil
}

// replayed are the input ranges the run read a second time, from its
// diagram's replay marks: per source lane and partition, from where the
// restored recovery point put the read position to where the reads had
// got before the crash.
func replayed(t *traced) ([]mistake.Step, error) {
	open := map[string]int64{}
	var out []mistake.Step
	for _, e := range t.rec.Events {
		key := e.Lane + "\x00" + e.Channel
		switch e.Kind {
		case spacetime.ReplayStart:
			open[key] = e.ID
		case spacetime.ReplayEnd:
			from, ok := open[key]
			if !ok {
				continue
			}
			delete(open, key)
			input, p, err := partitionOf(t, e.Channel)
			if err != nil {
				return nil, err
			}
			out = append(out, mistake.Step{Task: e.Lane, Input: input, Partition: p, From: from, To: e.ID})
		}
	}
	return out, nil
}

// partitionOf finds which input and partition a replay mark's channel
// names: the partition's name, after "<input>/" where the executor adds
// it.
func partitionOf(t *traced, channel string) (string, int, error) {
	inputs := slices.Sorted(func(yield func(string) bool) {
		for name := range t.cfg.Inputs {
			if !yield(name) {
				return
			}
		}
	})
	for _, input := range inputs {
		part, ok := strings.CutPrefix(channel, input+"/")
		if !ok {
			if len(inputs) > 1 {
				continue
			}
			part = channel
		}
		names, err := partitionNames(t.cfg.Inputs[input])
		if err != nil {
			return "", 0, err
		}
		if i := slices.Index(names, part); i >= 0 {
			return input, i, nil
		}
	}
	return "", 0, fmt.Errorf("a replay mark names partition %q, which no input has", channel)
}

// rowIDs are the ids of the rows in table.
func rowIDs(table *sink.Table) (map[int64]bool, error) {
	col := slices.Index(table.Columns, "id")
	if col < 0 {
		return nil, fmt.Errorf("the output has no id column (columns %v)", table.Columns)
	}
	ids := make(map[int64]bool, len(table.Rows))
	for _, r := range table.Rows {
		ids[r[col]] = true
	}
	return ids, nil
}

// publishedIn are the ids of the rows in the visible files of t's output
// that in says to take, read through a scratch directory holding links
// to those files only.
func (c *classroom) publishedIn(t *traced, in func(file string) bool) (map[int64]bool, error) {
	entries, err := os.ReadDir(t.cfg.Output)
	if err != nil {
		return nil, err
	}
	c.label++
	dir := filepath.Join(c.dir, fmt.Sprintf("%02d-files", c.label))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	for _, e := range entries {
		if n := e.Name(); !strings.HasPrefix(n, "_") && !strings.HasPrefix(n, ".") && in(n) {
			if err := os.Link(filepath.Join(t.cfg.Output, n), filepath.Join(dir, n)); err != nil {
				return nil, err
			}
		}
	}
	j, err := job.Build(t.cfg.Job, t.cfg.Params)
	if err != nil {
		return nil, err
	}
	table, _, err := sink.Resolve(dir, j.Output)
	if err != nil {
		return nil, err
	}
	return rowIDs(table)
}

// idList is ids sorted and shortened to fit a line: "7 8 9 ... (13)".
func idList(ids map[int64]bool) string {
	s := slices.Sorted(func(yield func(int64) bool) {
		for id := range ids {
			if !yield(id) {
				return
			}
		}
	})
	const show = 6
	var b strings.Builder
	for i, id := range s {
		if i == show {
			b.WriteString(" …")
			break
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.FormatInt(id, 10))
	}
	if len(s) == 0 {
		return "none"
	}
	return b.String()
}

// sameIDs says whether a and b hold the same ids.
func sameIDs(a, b map[int64]bool) bool {
	if len(a) != len(b) {
		return false
	}
	for id := range a {
		if !b[id] {
			return false
		}
	}
	return true
}

// partitionNames are the partitions of the input spec.
func partitionNames(spec string) ([]string, error) {
	src, err := source.Open(spec, source.Options{})
	if err != nil {
		return nil, err
	}
	defer src.Close()
	return src.Partitions(), nil
}
