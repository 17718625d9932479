package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/rewind-engine/rewind/dataflow/report"
)

// A child run is `rewind run …` started as its own process, exactly as a
// user types it: its figures are the ones that command prints, and its
// peak RSS is its own (the kernel's maxrss for the child), not the
// benchmark's.

// Child is how to start the rewind binary: Binary (a path) with Env added
// to this process's environment (tests run their own binary as the CLI).
type Child struct {
	Binary string
	Env    []string
}

// ChildRun is one finished child process.
type ChildRun struct {
	// Args are the arguments after the binary's name.
	Args []string
	// Summary is the last line of its stdout (--summary json).
	Summary *report.Summary
	// SummaryLine is that line as printed.
	SummaryLine string
	// MaxRSSBytes is the child's peak resident set (getrusage maxrss).
	MaxRSSBytes int64
	// Wall is from start to exit, as the parent saw it.
	Wall   time.Duration
	Stderr string
}

// Run starts the binary with args, waits for it and reads its JSON
// summary. A non-zero exit or a missing summary is an error naming the
// command and its last line of stderr.
func (c Child) Run(ctx context.Context, args []string) (*ChildRun, error) {
	cmd := exec.CommandContext(ctx, c.Binary, args...)
	cmd.Env = append(os.Environ(), c.Env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// Its own process group, so an interrupt of the benchmark is not also
	// delivered to the child behind its back (ctx kills it).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	start := time.Now()
	err := cmd.Run()
	cr := &ChildRun{Args: args, Wall: time.Since(start), Stderr: stderr.String()}
	if st := cmd.ProcessState; st != nil {
		if ru, ok := st.SysUsage().(*syscall.Rusage); ok {
			cr.MaxRSSBytes = ru.Maxrss * 1024 // Linux reports KiB
		}
	}
	if err != nil {
		return cr, fmt.Errorf("%s: %v: %s", CommandLine(args), err, lastLine(stderr.String()))
	}
	line := lastLine(stdout.String())
	var s report.Summary
	if err := json.Unmarshal([]byte(line), &s); err != nil {
		return cr, fmt.Errorf("%s: its last line of stdout is not a JSON summary: %v", CommandLine(args), err)
	}
	cr.Summary, cr.SummaryLine = &s, line
	return cr, nil
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

// CommandLine is `rewind` and args, quoted for a POSIX shell.
func CommandLine(args []string) string {
	parts := []string{"rewind"}
	for _, a := range args {
		parts = append(parts, ShellQuote(a))
	}
	return strings.Join(parts, " ")
}

// ShellQuote quotes s for a POSIX shell when it needs it.
func ShellQuote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"\\$`;&|<>*?()[]{}!#~") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
