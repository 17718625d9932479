package soak

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"syscall"
	"time"
)

// ProcResult is how one `rewind` process ended.
type ProcResult struct {
	Args     []string
	Exit     int  // the exit code; -1 when a signal ended it
	SIGKILL  bool // it died of SIGKILL
	Signal   string
	TimedOut bool // still running at the limit, then killed
	Stdout   string
	Stderr   string
	Took     time.Duration
}

// startProc runs bin with args in its own process group, dying with the
// harness (Pdeathsig). killAfter > 0 SIGKILLs the group that long after
// the start; limit bounds the whole run (a hang).
func startProc(ctx context.Context, bin string, env []string, args []string, killAfter, limit time.Duration) ProcResult {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	res := ProcResult{Args: args}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		res.Exit, res.Stderr = -1, "soak: cannot start "+bin+": "+err.Error()
		return res
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait() // the status is in ProcessState
		close(done)
	}()
	killGroup := func() { _ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var killC <-chan time.Time
	if killAfter > 0 {
		t := time.NewTimer(killAfter)
		defer t.Stop()
		killC = t.C
	}
	limitT := time.NewTimer(limit)
	defer limitT.Stop()
wait:
	for {
		select {
		case <-done:
			break wait
		case <-killC:
			killGroup()
			killC = nil
		case <-limitT.C:
			res.TimedOut = true
			killGroup()
			<-done
			break wait
		case <-ctx.Done():
			killGroup()
			<-done
			break wait
		}
	}
	// The group may hold children of the process: they die with it.
	killGroup()
	res.Took = time.Since(start)
	res.Stdout, res.Stderr = stdout.String(), stderr.String()
	res.Exit = cmd.ProcessState.ExitCode()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		res.Signal = ws.Signal().String()
		res.SIGKILL = ws.Signal() == syscall.SIGKILL
	}
	return res
}

// Lines are the lines of the process's standard error that are neither
// progress events (JSON) nor the run id line: its log and error lines.
func (p ProcResult) Lines() []string {
	var out []string
	for _, l := range strings.Split(strings.TrimRight(p.Stderr, "\n"), "\n") {
		if l == "" || strings.HasPrefix(l, "{") || runIDLine.MatchString(l) {
			continue
		}
		out = append(out, l)
	}
	return out
}

// FirstLine is the first of Lines, or "".
func (p ProcResult) FirstLine() string {
	if l := p.Lines(); len(l) > 0 {
		return l[0]
	}
	return ""
}

// ErrorLine is the last of Lines that is not a warning: where the CLI
// prints the error a run ended with.
func (p ProcResult) ErrorLine() string {
	l := p.Lines()
	for i := len(l) - 1; i >= 0; i-- {
		if !strings.HasPrefix(l[i], "rewind: warning:") {
			return l[i]
		}
	}
	return ""
}

// Events counts the progress events of a kind on standard error
// (--progress json), so the crashes and recoveries of a killed process,
// which prints no summary, are counted too.
func (p ProcResult) Events(kind string) int {
	return strings.Count(p.Stderr, `"event":"`+kind+`"`)
}

// goTrace is the start of a Go panic, a fatal runtime error (a SIGBUS on
// a truncated memory-mapped file, say) or a goroutine dump.
var goTrace = regexp.MustCompile(`(?m)^(panic: |fatal error: |goroutine \d+ )`)

// Panicked says whether the process printed a Go panic or fatal error.
func (p ProcResult) Panicked() bool { return goTrace.MatchString(p.Stderr) }
