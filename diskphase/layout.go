package diskphase

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/rewind-engine/rewind/dataflow/eventtime"
	"github.com/rewind-engine/rewind/dataflow/inspect"
)

// Everything a run keeps in durable shared storage lives under one
// namespace, diskphase/<job>/<run id>/ (see docs/diskphase.md):
//
//	run.json                                 the run plan (splits, parallelism, range mode)
//	coord/c<inc>                             one empty marker per coordinator incarnation
//	j<J>/plan.json                           the plan of finite job J (written before its units run)
//	j<J>/ledger/m<s>.json                    map unit s finished (its range, files, checksums)
//	j<J>/ledger/r<r>.json                    reduce unit r finished (output, state, checksums)
//	j<J>/map/s<s>/a<attempt>/p<r>.c<k>.parquet  chunk k of split s's map output for reduce partition r
//	j<J>/map/s<s>/a<attempt>/out.c<k>.parquet   map-only jobs: chunk k of the unit's output rows
//	j<J>/state/p<r>/a<attempt>.c<k>.parquet  chunk k of reduce partition r's state after job J
//	j<J>/out/p<r>/a<attempt>.c<k>.parquet    chunk k of reduce partition r's output rows (staged)
//	j<J>/published/p<r>                      append sink: partition r of job J was written
//	j<J>/_SUCCESS                            job commit marker (the tracker and offsets after J)
//
// Numbers are zero-padded so a listing sorts in job order. Data files carry
// the attempt that wrote them, so a late write of an abandoned attempt can
// never replace a file the ledger names; a file no ledger entry names is
// garbage and is deleted with its job's prefix.

// names builds the object names of one run.
type names struct{ root string }

func newNames(jobName, runID string) names {
	return names{root: inspect.RunPrefix("diskphase", jobName, runID)}
}

func (n names) runPlan() string           { return n.root + "run.json" }
func (n names) coordDir() string          { return n.root + "coord/" }
func (n names) coord(inc int) string      { return fmt.Sprintf("%sc%06d", n.coordDir(), inc) }
func (n names) jobDir(j int) string       { return fmt.Sprintf("%sj%06d/", n.root, j) }
func (n names) jobPlan(j int) string      { return n.jobDir(j) + "plan.json" }
func (n names) success(j int) string      { return n.jobDir(j) + "_SUCCESS" }
func (n names) mapDir(j int) string       { return n.jobDir(j) + "map/" }
func (n names) stateDir(j int) string     { return n.jobDir(j) + "state/" }
func (n names) outDir(j int) string       { return n.jobDir(j) + "out/" }
func (n names) publishedDir(j int) string { return n.jobDir(j) + "published/" }
func (n names) published(j, r int) string { return fmt.Sprintf("%sp%05d", n.publishedDir(j), r) }

func (n names) ledger(u UnitID) string {
	c := "m"
	if u.Kind == kindReduce {
		c = "r"
	}
	return fmt.Sprintf("%sledger/%s%05d.json", n.jobDir(u.Job), c, u.Index)
}

// mapFile names chunk k of a map unit's output for reduce partition part
// (chunks.go). Every chunk, the first too, carries its number, so the
// chunks of a file are one kind of name.
func (n names) mapFile(j, split, attempt, part, chunk int) string {
	return fmt.Sprintf("%ss%05d/a%d/p%05d.c%05d.parquet", n.mapDir(j), split, attempt, part, chunk)
}

// mapOutFile names chunk k of a map-only unit's output.
func (n names) mapOutFile(j, split, attempt, chunk int) string {
	return fmt.Sprintf("%ss%05d/a%d/out.c%05d.parquet", n.mapDir(j), split, attempt, chunk)
}

// stateFile names chunk k of a reduce unit's state table (state.go).
func (n names) stateFile(j, part, attempt, chunk int) string {
	return fmt.Sprintf("%sp%05d/a%d.c%05d.parquet", n.stateDir(j), part, attempt, chunk)
}

// outFile names chunk k of a reduce unit's staged output.
func (n names) outFile(j, part, attempt, chunk int) string {
	return fmt.Sprintf("%sp%05d/a%d.c%05d.parquet", n.outDir(j), part, attempt, chunk)
}

// objectKind classifies a name found by listing the run's namespace.
type objectKind int

const (
	objOther objectKind = iota
	objRunPlan
	objCoord
	objJobPlan
	objLedger
	objSuccess
	objPublished
	objMapFile
)

// parsedName is what a listed name says about itself.
type parsedName struct {
	kind objectKind
	job  int
	unit UnitID // objLedger
	num  int    // objCoord: incarnation; objPublished: partition
	file mapFileName
}

// mapFileName is what a map chunk's name says: its split, attempt, reduce
// partition (-1 for a map-only unit's output) and chunk.
type mapFileName struct{ split, attempt, part, chunk int }

// parse classifies an object name of this run. Map chunks are objMapFile;
// other data files and anything unknown are objOther: restart needs only
// the small records. Only the
// spelling the executor writes is accepted ("c1" is not "c000001"), so two
// objects never both claim to be the same record.
func (n names) parse(name string) parsedName {
	p := n.parseLax(name)
	var want string
	switch p.kind {
	case objOther:
		return p
	case objRunPlan:
		want = n.runPlan()
	case objCoord:
		want = n.coord(p.num)
	case objJobPlan:
		want = n.jobPlan(p.job)
	case objSuccess:
		want = n.success(p.job)
	case objPublished:
		want = n.published(p.job, p.num)
	case objLedger:
		want = n.ledger(p.unit)
	case objMapFile:
		f := p.file
		if f.part < 0 {
			want = n.mapOutFile(p.job, f.split, f.attempt, f.chunk)
		} else {
			want = n.mapFile(p.job, f.split, f.attempt, f.part, f.chunk)
		}
	}
	if want != name {
		return parsedName{}
	}
	return p
}

// parseLax is parse without the spelling check.
func (n names) parseLax(name string) parsedName {
	rest, ok := strings.CutPrefix(name, n.root)
	if !ok {
		return parsedName{}
	}
	if rest == "run.json" {
		return parsedName{kind: objRunPlan}
	}
	if c, ok := strings.CutPrefix(rest, "coord/c"); ok {
		if v, err := strconv.Atoi(c); err == nil && v >= 0 {
			return parsedName{kind: objCoord, num: v}
		}
		return parsedName{}
	}
	if len(rest) < 8 || rest[0] != 'j' || rest[7] != '/' {
		return parsedName{}
	}
	j, err := strconv.Atoi(rest[1:7])
	if err != nil || j < 0 {
		return parsedName{}
	}
	sub := rest[8:]
	switch {
	case sub == "plan.json":
		return parsedName{kind: objJobPlan, job: j}
	case sub == "_SUCCESS":
		return parsedName{kind: objSuccess, job: j}
	case strings.HasPrefix(sub, "published/p"):
		if v, err := strconv.Atoi(sub[len("published/p"):]); err == nil && v >= 0 {
			return parsedName{kind: objPublished, job: j, num: v}
		}
	case strings.HasPrefix(sub, "ledger/") && strings.HasSuffix(sub, ".json"):
		body := strings.TrimSuffix(sub[len("ledger/"):], ".json")
		if len(body) < 2 {
			return parsedName{}
		}
		kind := kindMap
		switch body[0] {
		case 'm':
		case 'r':
			kind = kindReduce
		default:
			return parsedName{}
		}
		v, err := strconv.Atoi(body[1:])
		if err != nil || v < 0 {
			return parsedName{}
		}
		return parsedName{kind: objLedger, job: j, unit: UnitID{Job: j, Kind: kind, Index: v}}
	case strings.HasPrefix(sub, "map/"):
		if f, ok := parseMapFile(sub[len("map/"):]); ok {
			return parsedName{kind: objMapFile, job: j, file: f}
		}
	}
	return parsedName{}
}

// parseMapFile reads s<s>/a<attempt>/p<r>.c<k>.parquet or
// s<s>/a<attempt>/out.c<k>.parquet.
func parseMapFile(s string) (mapFileName, bool) {
	parts := strings.Split(s, "/")
	if len(parts) != 3 || !strings.HasPrefix(parts[0], "s") || !strings.HasPrefix(parts[1], "a") {
		return mapFileName{}, false
	}
	base, ok := strings.CutSuffix(parts[2], ".parquet")
	if !ok {
		return mapFileName{}, false
	}
	file, chunk, ok := strings.Cut(base, ".c")
	if !ok {
		return mapFileName{}, false
	}
	f := mapFileName{part: -1}
	nums := []*int{&f.split, &f.attempt, &f.chunk}
	texts := []string{parts[0][1:], parts[1][1:], chunk}
	if file != "out" {
		p, ok := strings.CutPrefix(file, "p")
		if !ok {
			return mapFileName{}, false
		}
		nums, texts = append(nums, &f.part), append(texts, p)
	}
	for i, t := range texts {
		v, err := strconv.Atoi(t)
		if err != nil || v < 0 {
			return mapFileName{}, false
		}
		*nums[i] = v
	}
	return f, true
}

// RunPlan is run.json: what every coordinator incarnation of a run must
// agree on. A restarted coordinator refuses a namespace whose plan differs
// from its own (another job, other inputs, another parallelism).
type RunPlan struct {
	Job         string            `json:"job"`
	Inputs      map[string]string `json:"inputs"`
	Splits      []string          `json:"splits"` // "<input>/<partition>", in split order
	Parallelism int               `json:"parallelism"`
	MapOnly     bool              `json:"map_only"`
	// Mode is "whole" (one finite job over a bounded input), "records"
	// (PerSplit records of every split per finite job) or "interval"
	// (IntervalMs of reading per map unit).
	Mode        string `json:"mode"`
	PerSplit    int64  `json:"per_split,omitempty"`
	IntervalMs  int64  `json:"interval_ms,omitempty"`
	MaxDisorder int64  `json:"max_disorder"`
	SinkMode    string `json:"sink_mode"`
}

func (p RunPlan) equal(q RunPlan) bool {
	if p.Job != q.Job || p.Parallelism != q.Parallelism || p.MapOnly != q.MapOnly || p.Mode != q.Mode ||
		p.PerSplit != q.PerSplit || p.IntervalMs != q.IntervalMs || p.MaxDisorder != q.MaxDisorder ||
		p.SinkMode != q.SinkMode || len(p.Splits) != len(q.Splits) || len(p.Inputs) != len(q.Inputs) {
		return false
	}
	for i := range p.Splits {
		if p.Splits[i] != q.Splits[i] {
			return false
		}
	}
	for k, v := range p.Inputs {
		if q.Inputs[k] != v {
			return false
		}
	}
	return true
}

// JobPlan is j<J>/plan.json, written before any unit of job J runs.
type JobPlan struct {
	Job int `json:"job"`
	// Starts and EOF describe every split: where job J starts reading it,
	// and whether an earlier job already reached its end (such splits get
	// no map unit).
	Starts []int64 `json:"starts"`
	EOF    []bool  `json:"eof"`
	// Ends are the planned end offsets (exclusive) per split, -1 when the
	// range is open: read to the end ("whole") or for IntervalMs
	// ("interval"); the map unit's ledger entry then fixes it.
	Ends []int64 `json:"ends"`
	// Tracker is the event-time tracker after the previous finite job.
	Tracker eventtime.State `json:"tracker"`
}

// active lists the splits that get a map unit.
func (p JobPlan) active() []int {
	var out []int
	for s, eof := range p.EOF {
		if !eof {
			out = append(out, s)
		}
	}
	return out
}

// FileRef names a materialised file and what it must contain. A map
// unit's output for one partition, a reduce unit's output and its state
// may be written in chunks (chunks.go):
// the reference then names the first, and More the others in order, each
// with its own rows and checksum. Ledgers written before chunks have no
// More, and read as files of one chunk.
type FileRef struct {
	Name  string    `json:"name,omitempty"` // "" means an empty table: no object was written
	Rows  int64     `json:"rows"`
	Bytes int64     `json:"bytes"`
	CRC   uint32    `json:"crc32c"`
	More  []FileRef `json:"more,omitempty"`
}

// MapEntry is a map unit's ledger entry.
type MapEntry struct {
	Attempt int   `json:"attempt"`
	Start   int64 `json:"start"`
	End     int64 `json:"end"`
	// Records were read from the source; Lost could not be given back by
	// a forgetful source.
	Records int64 `json:"records"`
	Lost    int64 `json:"lost"`
	// MaxTS is the greatest event time read (NoWatermark when none); EOF
	// says the split ended inside this range.
	MaxTS int64 `json:"max_ts"`
	EOF   bool  `json:"eof"`
	// Files has one entry per reduce partition, or one (the output) for
	// map-only jobs.
	Files []FileRef `json:"files"`
}

// ReduceEntry is a reduce unit's ledger entry.
type ReduceEntry struct {
	Attempt  int     `json:"attempt"`
	RowsIn   int64   `json:"rows_in"`
	LateRows int64   `json:"late_rows"`
	Out      FileRef `json:"out"`
	// State is the operator state after the job (stateful reduce only).
	State *FileRef `json:"state,omitempty"`
	// Rebuilt marks an entry written by a state-only re-run of a unit
	// whose job had already committed: Out is the original attempt's.
	Rebuilt bool `json:"rebuilt,omitempty"`
}

// JobCommit is the _SUCCESS marker of a committed finite job.
type JobCommit struct {
	Job     int             `json:"job"`
	Ends    []int64         `json:"ends"` // per split, where the next job starts
	EOF     []bool          `json:"eof"`
	Tracker eventtime.State `json:"tracker"` // after this job
	// Records were read by the job's map units; RowsOut and LateRows are
	// what its reduce (or map-only) units produced and dropped.
	Records  int64 `json:"records"`
	RowsOut  int64 `json:"rows_out"`
	LateRows int64 `json:"late_rows"`
}
