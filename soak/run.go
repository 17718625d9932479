package soak

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/rewind-engine/rewind/dataflow/runrecord"
	"github.com/rewind-engine/rewind/dataflow/sink"
)

// runIDLine is what every non-reference run prints on stderr at start.
var runIDLine = regexp.MustCompile(`^rewind: (?:run (\S+) \(if this process dies|resuming run (\S+) from )`)

// Result is what one schedule came to.
type Result struct {
	Sched   *Schedule
	Verdict Verdict
	Reason  string

	Procs      int // rewind processes run
	Crashes    int // crashes that fired: in-process ones and process kills
	Kills      int // process deaths (planned SIGKILLs that happened)
	Recoveries int // recoveries the processes reported
	Damaged    []Damaged
	Outages    int // freezes of the S3 server
	OutageHits int // of which the process was still running when frozen
	Unfired    int // kills planned but never reached (the run ended first)

	Commands []string // the shell lines that replay it
	Stderr   []string // the last process's log and error lines (the first few)
	Dir      string   // kept when the schedule failed
	Took     time.Duration
}

// runner runs schedules with one binary.
type runner struct {
	bin     string
	work    string
	limit   time.Duration // per process
	refs    *references
	servers []*S3Server // one per parallel slot; nil: no outages
	keep    bool        // keep the directories of failed schedules
}

// run runs schedule s in parallel slot slot; nil if ctx ended first.
func (rn *runner) run(ctx context.Context, s *Schedule, slot int) *Result {
	start := time.Now()
	res := &Result{Sched: s}
	defer func() { res.Took = time.Since(start) }()
	dir, err := os.MkdirTemp(rn.work, fmt.Sprintf("s%d-", s.Index))
	if err != nil {
		res.Verdict, res.Reason = Failure, "soak: "+err.Error()
		return res
	}
	defer func() {
		if res.Verdict.Failed() && rn.keep {
			res.Dir = dir
			return
		}
		os.RemoveAll(dir)
	}()
	out := filepath.Join(dir, "out")
	storeDir := filepath.Join(dir, "store")
	storeURL := "file://" + storeDir
	var env []string
	var srv *S3Server
	if s.Outage != nil {
		if slot >= len(rn.servers) {
			res.Verdict, res.Reason = Failure, "soak: an outage schedule without an S3 server (give -s3)"
			return res
		}
		srv = rn.servers[slot]
		env = srv.Env
		storeURL = fmt.Sprintf("s3://soak/s%d-%d", s.Index, time.Now().UnixNano())
		storeDir = "" // damage is not drawn for S3 schedules
		res.Commands = append(res.Commands, "# storage on the S3 server of: "+strings.Join(env, " "))
	}
	layout, err := layoutOf(s.Job)
	if err != nil {
		res.Verdict, res.Reason = Failure, "soak: "+err.Error()
		return res
	}

	base := []string{"run", "--executor", s.Mode.Executor}
	base = append(base, s.Mode.Flags...)
	base = append(base, "--job", s.Job, "--sink-mode", s.SinkMode, "--output-format", s.Format,
		"--parallelism", fmt.Sprint(s.Parallelism), "--output", out, "--storage", storeURL,
		"--summary", "json", "--progress", "json")
	for _, in := range s.Inputs {
		if s.Rate > 0 {
			in += fmt.Sprintf(",rate=%d", s.Rate)
		}
		base = append(base, "--input", in)
	}
	base = append(base, s.Params...)
	base = append(base, s.Settings...)

	procs := append([]Process(nil), s.Procs...)
	runID := ""
	for k := 0; k < len(procs); k++ {
		p := procs[k]
		args := append([]string(nil), base...)
		if k > 0 && runID != "" {
			args = append(args, "--resume")
		} else if k > 0 {
			// The process died before it recorded its run: there is
			// nothing to resume, so the job starts again.
			args = append(args, "--overwrite")
		}
		for _, f := range p.Fails {
			args = append(args, "--fail", f)
		}
		var killAfter time.Duration
		if p.Kill != nil && p.Kill.Point != "" {
			args = append(args, "--fail", p.Kill.String())
		} else if p.Kill != nil {
			killAfter = max(p.Kill.After, time.Millisecond)
		}
		res.Commands = append(res.Commands, shellLine(rn.bin, args))
		if killAfter > 0 {
			res.Commands = append(res.Commands, fmt.Sprintf("#   ...SIGKILLed %s after its start (the harness's timing; a replay lands elsewhere)", killAfter))
		}
		stopOutage := func() {}
		if s.Outage != nil && k == 0 {
			res.Outages++
			stopOutage = srv.freeze(s.Outage.After, s.Outage.For)
			res.Commands = append(res.Commands, fmt.Sprintf("#   ...with the S3 server (pid %d) frozen: sleep %s; kill -STOP PID; sleep %s; kill -CONT PID", srv.Pid, s.Outage.After, s.Outage.For))
		}
		pr := startProc(ctx, rn.bin, env, args, killAfter, rn.limit)
		stopOutage()
		if s.Outage != nil && k == 0 && pr.Took > s.Outage.After {
			res.OutageHits++
		}
		res.Procs++
		res.Crashes += pr.Events("crash")
		recovered := pr.Events("recovery")
		if runID == "" {
			runID = findRunID(pr.Stderr)
		}
		if ctx.Err() != nil {
			return nil // interrupted: no verdict
		}
		if sum, err := ParseSummary(pr.Stdout); err == nil {
			// Not every executor reports recoveries as events.
			recovered = max(recovered, len(sum.Recoveries))
		}
		res.Recoveries += recovered
		if p.Kill != nil && pr.SIGKILL && !pr.TimedOut && finished(out) {
			// A SIGKILL a moment too late: the run had finished and
			// marked itself so, leaving nothing to resume. Its output is
			// judged; its summary was never printed.
			res.Unfired++
			o := Outcome{Proc: pr, Damaged: res.Damaged}
			o.Proc.Exit, o.Proc.SIGKILL, o.Proc.Signal = 0, false, ""
			o.Wrong = rn.judgeOutput(ctx, s, nil, out, layout)
			res.Verdict, res.Reason = Classify(o)
			return res
		}
		if p.Kill != nil && pr.SIGKILL && !pr.TimedOut {
			res.Kills++
			res.Crashes++
			if p.Damage != nil {
				files, err := DurableFiles(storeDir, out, runID)
				if err != nil {
					res.Verdict, res.Reason = Failure, "soak: listing durable files: "+err.Error()
					return res
				}
				d, ok, err := p.Damage.Apply(files)
				if err != nil {
					res.Verdict, res.Reason = Failure, "soak: damaging a file: "+err.Error()
					return res
				}
				if ok {
					res.Damaged = append(res.Damaged, d)
					res.Commands = append(res.Commands, d.Shell())
				}
			}
			continue
		}
		if p.Kill != nil && pr.Exit == 0 {
			res.Unfired++
		}
		if s.Outage != nil && k == 0 && pr.Exit == 1 && !pr.TimedOut && !pr.Panicked() {
			// Storage that stopped answering may end a run with a clear
			// error; it must then resume to the reference's result.
			procs = append(procs, Process{})
			continue
		}
		res.Stderr = pr.Lines()[:min(8, len(pr.Lines()))]
		o := Outcome{Proc: pr, Damaged: res.Damaged}
		if pr.Exit == 0 && !pr.TimedOut {
			sum, err := ParseSummary(pr.Stdout)
			if err != nil {
				o.Wrong = err.Error()
			} else {
				o.Wrong = rn.judgeOutput(ctx, s, sum, out, layout)
			}
		}
		res.Verdict, res.Reason = Classify(o)
		return res
	}
	res.Verdict, res.Reason = Failure, "soak: the schedule ended without a last process"
	return res
}

// finished says whether the run record in out says the run finished.
func finished(out string) bool {
	rec, err := runrecord.Read(out)
	return err == nil && rec.Finished != nil
}

// judgeOutput compares a finished run's output with the reference's (and
// with its summary, if it printed one).
func (rn *runner) judgeOutput(ctx context.Context, s *Schedule, sum *Summary, out string, layout sink.Layout) string {
	want, err := rn.refs.get(ctx, s, layout)
	if err != nil {
		return "soak: " + err.Error()
	}
	return CheckOutput(sum, out, sink.Mode(s.SinkMode), sink.Format(s.Format), layout, want)
}

func findRunID(stderr string) string {
	for _, l := range strings.Split(stderr, "\n") {
		if m := runIDLine.FindStringSubmatch(l); m != nil {
			return m[1] + m[2]
		}
	}
	return ""
}

// shellLine is args as one shell command line.
func shellLine(bin string, args []string) string {
	q := []string{shellQuote(bin)}
	for _, a := range args {
		q = append(q, shellQuote(a))
	}
	return strings.Join(q, " ")
}

func shellQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"\\$`!*?[]{}()<>|&;#~") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// S3Server is a private S3 server (scripts/s3-server.sh) a slot's outage
// schedules keep their storage on, so freezing it stops no other slot.
type S3Server struct {
	Dir string
	Pid int
	Env []string // REWIND_S3_ENDPOINT and credentials
}

// freeze stops the server after `after` for `span`, in the background;
// the returned func waits for it to be running again.
func (s *S3Server) freeze(after, span time.Duration) (wait func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(after)
		_ = syscall.Kill(s.Pid, syscall.SIGSTOP)
		time.Sleep(span)
		_ = syscall.Kill(s.Pid, syscall.SIGCONT)
	}()
	return func() { <-done }
}
