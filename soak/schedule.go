// Package soak is rewind's reliability campaign: seeded schedules of
// crashes, process kills, damage to durable files and storage outages,
// each carried out with the real CLI binary and judged against the
// reference executor's output on the same input. Schedule i of seed S is
// a pure function of (S, i), so any schedule can be replayed; a failing one
// prints the one command that replays it and the raw rewind command lines.
//
// The package knows the executors only as values of --executor and the
// flags each takes; their crash points are asked of the binary
// (--list-fail-points), and durable files are classified by their paths,
// not by which executor wrote them.
package soak

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/rewind-engine/rewind/dataflow/fault"
)

// Mode is one executor and barrier mode of the campaign: schedule i runs
// in Modes[i % len(Modes)].
type Mode struct {
	Name     string
	Executor string
	Flags    []string // fixed flags of the mode (the barrier mode)
}

var Modes = []Mode{
	{Name: "microbatch", Executor: "microbatch"},
	{Name: "diskphase", Executor: "diskphase"},
	{Name: "recordwise-aligned", Executor: "recordwise", Flags: []string{"--barriers", "aligned"}},
	{Name: "recordwise-unaligned", Executor: "recordwise", Flags: []string{"--barriers", "unaligned"}},
}

// ModeByName returns the mode called name.
func ModeByName(name string) (Mode, bool) {
	i := slices.IndexFunc(Modes, func(m Mode) bool { return m.Name == name })
	if i < 0 {
		return Mode{}, false
	}
	return Modes[i], true
}

// Points are the named crash points of each executor, as the binary lists
// them (ListPoints).
type Points map[string][]string

// Kill is how a process of a schedule is to die, if it is.
type Kill struct {
	// Point, with Occurrence, is a --fail point=...,kill=process.
	Point      string
	Occurrence int
	// After, when Point is empty, is an external SIGKILL of the process
	// group this long after the start.
	After time.Duration
}

func (k Kill) String() string {
	if k.Point != "" {
		return fmt.Sprintf("point=%s,occurrence=%d,kill=process", k.Point, k.Occurrence)
	}
	return fmt.Sprintf("SIGKILL after %s", k.After)
}

// Damage is what is done to one durable file between a process kill and
// the next --resume. The file is chosen when it is done, among those that
// exist then (a schedule damages one file at most): Kind picks a kind by its index in the sorted kinds present
// (modulo their number), Pick a file of that kind likewise (Newest: the
// greatest name instead), Action what happens to it.
type Damage struct {
	Kind, Pick int
	Newest     bool
	Action     string // one of Actions
	At         int64  // flip: byte offset seed (modulo the size)
}

// Actions are the kinds of damage done to a file.
var Actions = []string{"truncate-0", "truncate-half", "flip", "delete"}

// Outage freezes the S3 server a schedule's storage lives on (SIGSTOP)
// After the first process started, for For, then continues it (SIGCONT).
type Outage struct {
	After, For time.Duration
}

// Process is one `rewind run` of a schedule.
type Process struct {
	Fails  []string // in-process crashes (--fail, recovered within the process)
	Kill   *Kill    // nil: the process is to run to the end
	Damage *Damage  // after the kill, before the next process
}

// Schedule is everything one schedule does, drawn from (Seed, Index).
type Schedule struct {
	Seed  uint64
	Index int
	Mode  Mode

	Job, SinkMode, Format string
	Parallelism           int
	Inputs                []string // --input values, unpaced (the reference's)
	Rate                  int      // records a second for each input (0: not paced)
	Params                []string // job parameter flags
	Settings              []string // executor flags
	Outage                *Outage  // storage on S3, frozen once
	Procs                 []Process
}

// Name is the schedule's short name in progress and failure lines.
func (s *Schedule) Name() string { return fmt.Sprintf("#%d %s", s.Index, s.Mode.Name) }

// Describe says in one line what the schedule does.
func (s *Schedule) Describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s %s/%s p%d", s.Name(), s.Job, s.SinkMode, s.Format, s.Parallelism)
	if s.Outage != nil {
		fmt.Fprintf(&b, ", S3 frozen %s after %s", s.Outage.For, s.Outage.After)
	}
	for i, p := range s.Procs {
		fmt.Fprintf(&b, "; process %d:", i+1)
		for _, f := range p.Fails {
			b.WriteString(" crash " + f)
		}
		if p.Kill != nil {
			b.WriteString(" killed " + p.Kill.String())
		}
		if p.Damage != nil {
			fmt.Fprintf(&b, " then %s of a durable file", p.Damage.Action)
		}
	}
	return b.String()
}

// Draw returns schedule i of seed: a pure function of (seed, i, points).
// withS3 says whether storage outages may be drawn (a server is there).
func Draw(seed uint64, i int, points Points, withS3 bool) *Schedule {
	r := rand.New(rand.NewPCG(seed, uint64(i)))
	s := &Schedule{Seed: seed, Index: i, Mode: Modes[i%len(Modes)]}
	s.Job = []string{"keyed-count", "windowed-sum", "join", "etl"}[r.IntN(4)]
	s.SinkMode = []string{"append", "idempotent", "transactional"}[r.IntN(3)]
	s.Format = []string{"parquet", "csv"}[r.IntN(2)]
	s.Parallelism = 1 + r.IntN(3)

	// A small pool of inputs, so the reference's answers are reused.
	records := 2000 * (1 + r.IntN(2))
	partitions := 1 + r.IntN(3)
	dataSeed := 1 + r.IntN(4)
	gen := func(seed int) string {
		return fmt.Sprintf("gen:records=%d,keys=%d,partitions=%d,seed=%d", records, records/4, partitions, seed)
	}
	if s.Job == "join" {
		s.Inputs = []string{"orders=" + gen(dataSeed), "payments=" + gen(dataSeed+100)}
	} else {
		s.Inputs = []string{gen(dataSeed)}
	}
	if s.Job == "windowed-sum" {
		s.Params = []string{"--window", "200ms"}
	}
	if r.IntN(2) == 0 {
		s.Rate = records * (2 + r.IntN(3)) // the input lasts a third to half a second
	}

	switch s.Mode.Executor {
	case "microbatch":
		s.Settings = []string{"--max-batch-records", fmt.Sprint(records / (2 + r.IntN(5))),
			"--trigger", fmt.Sprintf("%dms", 10+10*r.IntN(4)), "--retained-batches", fmt.Sprint(2 + r.IntN(6)),
			"--lost-piece-recovery", []string{"lineage", "rerun-batch"}[r.IntN(2)]}
	case "diskphase":
		s.Settings = []string{"--job-records", fmt.Sprint(records / (1 + r.IntN(4))),
			"--lost-piece-recovery", []string{"lineage", "rerun-batch"}[r.IntN(2)]}
	default:
		s.Settings = []string{"--checkpoint-interval", fmt.Sprintf("%dms", 20+20*r.IntN(4)),
			"--retained-checkpoints", fmt.Sprint(1 + r.IntN(3))}
	}

	all := points[s.Mode.Executor]
	var inProcess []string // points a role can crash at and be restarted
	for _, p := range all {
		if !slices.Contains(fault.RunPoints, p) {
			inProcess = append(inProcess, p)
		}
	}
	crash := func() string {
		if r.IntN(3) == 0 || len(inProcess) == 0 {
			return fmt.Sprintf("worker=%d,after-records=%d", r.IntN(s.Parallelism), 1+r.IntN(records))
		}
		return fmt.Sprintf("point=%s,occurrence=%d", inProcess[r.IntN(len(inProcess))], 1+r.IntN(3))
	}

	// Drawn whether or not a server is there, so that the rest of the
	// schedule is the same either way.
	if outage := r.IntN(16) == 0; outage && withS3 {
		s.Outage = &Outage{After: time.Duration(50+r.IntN(400)) * time.Millisecond, For: time.Duration(1+r.IntN(4)) * time.Second}
		s.Procs = []Process{{Fails: drawFails(r, crash, 1)}}
		return s
	}

	killed := r.IntN(4) // processes that die before the last
	damaged := false
	for k := 0; k <= killed; k++ {
		p := Process{Fails: drawFails(r, crash, 2)}
		if k < killed {
			p.Kill = drawKill(r, all, s.Rate > 0, k > 0)
			// One damage a schedule at most, so that its outcome is
			// that damage's.
			if r.IntN(5) < 2 && !damaged {
				damaged = true
				p.Damage = &Damage{Kind: r.IntN(1 << 20), Pick: r.IntN(1 << 20), Newest: r.IntN(2) == 0,
					Action: Actions[r.IntN(len(Actions))], At: r.Int64N(1 << 40)}
			}
		}
		s.Procs = append(s.Procs, p)
	}
	return s
}

// drawFails draws up to max in-process crashes.
func drawFails(r *rand.Rand, crash func() string, max int) []string {
	var out []string
	for range r.IntN(max + 1) {
		out = append(out, crash())
	}
	return out
}

// drawKill draws how a process dies. A resumed process (resumed) dies
// early now and then, while it restores: a crash during recovery.
func drawKill(r *rand.Rand, points []string, paced, resumed bool) *Kill {
	if paced && r.IntN(4) == 0 {
		return &Kill{After: time.Duration(r.IntN(500)) * time.Millisecond}
	}
	if resumed && r.IntN(3) == 0 {
		// While it restores, or at the first point a run reaches.
		early := []string{points[0]}
		for _, p := range points {
			if strings.Contains(p, "restore") {
				early = append(early, p)
			}
		}
		return &Kill{Point: early[r.IntN(len(early))], Occurrence: 1}
	}
	p := points[r.IntN(len(points))]
	occ := 1
	if !slices.Contains(fault.RunPoints, p) {
		occ += r.IntN(4)
	}
	return &Kill{Point: p, Occurrence: occ}
}
