package soak

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Config is one campaign.
type Config struct {
	Bin      string // the rewind binary
	Work     string // scratch directory
	Seed     uint64
	PerMode  int   // schedules per mode: indexes 0 .. PerMode*len(Modes)-1
	Only     []int // just these schedules (replay), if set
	Parallel int
	Limit    time.Duration // per process: longer is a hang
	S3Script string        // scripts/s3-server.sh: outage schedules get a server per slot; "": none drawn
	Keep     bool          // keep the directories of failed schedules
	Log      io.Writer     // progress and failures
	// Replay is the harness's command, to which -seed S -only i is added
	// in the line that replays a failed schedule.
	Replay string
}

// Totals are the counts of one mode (or all), as docs/reliability.md
// shows them.
type Totals struct {
	Schedules, Procs, Crashes, Kills, Recoveries   int
	DamageTried, DamageRecovered, Detected, Silent int
	Outages, OutageHits, Failures, Unfired         int
}

func (t *Totals) add(r *Result) {
	t.Schedules++
	t.Procs += r.Procs
	t.Crashes += r.Crashes
	t.Kills += r.Kills
	t.Recoveries += r.Recoveries
	t.DamageTried += len(r.Damaged)
	t.Outages += r.Outages
	t.OutageHits += r.OutageHits
	t.Unfired += r.Unfired
	switch r.Verdict {
	case OK:
		if len(r.Damaged) > 0 {
			t.DamageRecovered++
		}
	case Detected:
		t.Detected++
	case Silent:
		t.Silent++
		t.Failures++
	case Failure:
		t.Failures++
	}
}

// KindTotals are the outcomes of damage to one kind of durable file.
type KindTotals struct {
	Tried, Recovered, Detected, Silent, Failed int
}

// Report is a finished campaign.
type Report struct {
	Config  Config
	ByMode  map[string]*Totals
	All     Totals
	ByKind  map[string]*KindTotals
	Failed  []*Result
	Took    time.Duration
	Started time.Time
}

// ExitCode is the harness's exit code: 1 if any schedule failed (a silent
// wrong result included).
func (r *Report) ExitCode() int {
	if r.All.Failures > 0 || r.All.Silent > 0 {
		return 1
	}
	return 0
}

// Indexes are the schedules the campaign runs.
func (c Config) Indexes() []int {
	if len(c.Only) > 0 {
		return c.Only
	}
	out := make([]int, c.PerMode*len(Modes))
	for i := range out {
		out[i] = i
	}
	return out
}

// Run runs the campaign.
func Run(ctx context.Context, c Config) (*Report, error) {
	points, err := ListPoints(c.Bin)
	if err != nil {
		return nil, err
	}
	rn := &runner{bin: c.Bin, work: c.Work, limit: c.Limit, refs: newReferences(c.Bin, c.Work), keep: c.Keep}
	if c.S3Script != "" {
		for slot := range c.Parallel {
			srv, err := StartS3(c.S3Script, filepath.Join(c.Work, fmt.Sprintf("s3-%d", slot)))
			if err != nil {
				return nil, err
			}
			defer srv.Stop(c.S3Script)
			rn.servers = append(rn.servers, srv)
		}
	}
	rep := &Report{Config: c, ByMode: map[string]*Totals{}, ByKind: map[string]*KindTotals{}, Started: time.Now()}
	for _, m := range Modes {
		rep.ByMode[m.Name] = &Totals{}
	}
	idx := c.Indexes()
	work := make(chan int)
	results := make(chan *Result)
	var wg sync.WaitGroup
	for slot := range c.Parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if r := rn.run(ctx, Draw(c.Seed, i, points, c.S3Script != ""), slot); r != nil {
					results <- r
				}
			}
		}()
	}
	go func() {
		defer close(work)
		for _, i := range idx {
			select {
			case work <- i:
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() { wg.Wait(); close(results) }()

	lastLine := time.Time{}
	for r := range results {
		rep.add(r)
		if r.Verdict.Failed() {
			fmt.Fprint(c.Log, r.FailureText(c))
		}
		if done := rep.All.Schedules; time.Since(lastLine) > 10*time.Second || done == len(idx) {
			lastLine = time.Now()
			el := time.Since(rep.Started)
			rate := float64(done) / el.Minutes()
			eta := time.Duration(float64(len(idx)-done) / rate * float64(time.Minute))
			fmt.Fprintf(c.Log, "soak: %d/%d schedules (%.0f%%), %d failed, %d silent, %d detected; %.1f schedules/min; %s elapsed, about %s to go\n",
				done, len(idx), 100*float64(done)/float64(len(idx)), rep.All.Failures, rep.All.Silent, rep.All.Detected,
				rate, el.Round(time.Second), eta.Round(time.Second))
		}
	}
	rep.Took = time.Since(rep.Started)
	sort.Slice(rep.Failed, func(i, j int) bool { return rep.Failed[i].Sched.Index < rep.Failed[j].Sched.Index })
	if ctx.Err() != nil {
		return rep, ctx.Err()
	}
	return rep, nil
}

func (rep *Report) add(r *Result) {
	rep.All.add(r)
	rep.ByMode[r.Sched.Mode.Name].add(r)
	for i, d := range r.Damaged {
		k := rep.ByKind[d.File.Kind]
		if k == nil {
			k = &KindTotals{}
			rep.ByKind[d.File.Kind] = k
		}
		k.Tried++
		if i < len(r.Damaged)-1 {
			continue // the outcome is the last damage's
		}
		switch r.Verdict {
		case OK:
			k.Recovered++
		case Detected:
			k.Detected++
		case Silent:
			k.Silent++
		default:
			k.Failed++
		}
	}
	if r.Verdict.Failed() {
		rep.Failed = append(rep.Failed, r)
	}
}

// ReplayCommand is the one command that replays schedule r.
func (r *Result) ReplayCommand(c Config) string {
	return fmt.Sprintf("%s -seed %d -only %d", c.Replay, r.Sched.Seed, r.Sched.Index)
}

// FailureText is what the campaign prints for a failed schedule.
func (r *Result) FailureText(c Config) string {
	var b strings.Builder
	fmt.Fprintf(&b, "soak: %s %s: %s\n", r.Verdict, r.Sched.Name(), r.Reason)
	fmt.Fprintf(&b, "  schedule: %s\n", r.Sched.Describe())
	fmt.Fprintf(&b, "  replay:   %s\n", r.ReplayCommand(c))
	if r.Dir != "" {
		fmt.Fprintf(&b, "  kept:     %s\n", r.Dir)
	}
	if len(r.Stderr) > 0 {
		b.WriteString("  the last process's standard error (log and error lines):\n")
		for _, l := range r.Stderr {
			fmt.Fprintf(&b, "    | %s\n", l)
		}
	}
	b.WriteString("  the rewind commands:\n")
	for _, l := range r.Commands {
		fmt.Fprintf(&b, "    %s\n", l)
	}
	return b.String()
}

// ListPoints asks the binary for each executor's named crash points.
func ListPoints(bin string) (Points, error) {
	out := Points{}
	for _, m := range Modes {
		if out[m.Executor] != nil {
			continue
		}
		b, err := exec.Command(bin, "run", "--executor", m.Executor, "--list-fail-points").Output()
		if err != nil {
			return nil, fmt.Errorf("%s run --executor %s --list-fail-points: %v", bin, m.Executor, err)
		}
		out[m.Executor] = strings.Fields(string(b))
		if len(out[m.Executor]) == 0 {
			return nil, fmt.Errorf("%s lists no crash points for %s", bin, m.Executor)
		}
	}
	return out, nil
}

// StartS3 starts a private server with script (scripts/s3-server.sh) in
// dir.
func StartS3(script, dir string) (*S3Server, error) {
	cmd := exec.Command(script, "start", dir)
	cmd.Stderr = io.Discard
	if out, err := cmd.Output(); err != nil {
		return nil, fmt.Errorf("%s start %s: %v (%s)", script, dir, err, out)
	}
	pidText, err := os.ReadFile(filepath.Join(dir, "pid"))
	if err != nil {
		return nil, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(pidText)))
	if err != nil {
		return nil, fmt.Errorf("%s/pid: %v", dir, err)
	}
	envText, err := os.ReadFile(filepath.Join(dir, "env"))
	if err != nil {
		return nil, err
	}
	s := &S3Server{Dir: dir, Pid: pid}
	for _, l := range strings.Split(string(envText), "\n") {
		if kv, ok := strings.CutPrefix(strings.TrimSpace(l), "export "); ok {
			s.Env = append(s.Env, kv)
		}
	}
	return s, nil
}

// Stop stops the server (continuing it first, should it be frozen).
func (s *S3Server) Stop(script string) {
	_ = exec.Command("kill", "-CONT", strconv.Itoa(s.Pid)).Run()
	_ = exec.Command(script, "stop", s.Dir).Run()
}
