// Command rewind runs one dataflow job under several recovery models and
// reports what each costs. See `rewind --help` and docs/.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"regexp"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/rewind-engine/rewind/dataflow/outdir"
	"github.com/rewind-engine/rewind/dataflow/run"
)

// Exit codes: 2 is for anything the user typed wrong, 1 for a run that
// failed, 130 for an interrupt.
const (
	exitFailure = 1
	exitUsage   = 2
)

// usageError marks errors caused by invalid flags or arguments.
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

func main() {
	ctx, cancel := context.WithCancel(context.Background())
	firstSignalStops(cancel, os.Stderr)
	serveDebugProfiles(os.Stderr)
	code := execute(ctx, os.Args[1:], os.Stdout, os.Stderr)
	cancel()
	os.Exit(code)
}

// firstSignalStops cancels the command on the first SIGINT or SIGTERM and
// hands the next one back to its default action. The first stops the
// work and lets the command finish what it owes (a run's summary counts
// its output, which after an hour of writing takes minutes); a second ends
// the process at once. The output directory is consistent either way:
// counting only reads it, and `rewind resolve DIR` counts it later. The
// handler is in place when it returns.
func firstSignalStops(cancel context.CancelFunc, stderr io.Writer) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-sigs
		cancel()
		signal.Reset(os.Interrupt, syscall.SIGTERM)
		fmt.Fprintf(stderr, "rewind: %s: stopping and finishing what is owed (the summary); %s again quits at once\n", sigName(sig), sigName(sig))
	}()
}

func sigName(s os.Signal) string {
	if s == os.Interrupt {
		return "interrupt"
	}
	return s.String()
}

// execute runs the CLI and maps errors to exit codes. It never lets a panic
// reach the user as a stack trace.
func execute(ctx context.Context, args []string, stdout, stderr io.Writer) (code int) {
	defer func() {
		if r := recover(); r != nil {
			fmt.Fprintf(stderr, "rewind: internal error: %v (please report it with the command line you ran)\n", r)
			code = exitFailure
		}
	}()
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	fmt.Fprintf(stderr, "rewind: %v\n", err)
	var ue usageError
	var ie run.InputError
	var ob outdir.BusyError
	var re run.RefusedError
	switch {
	case errors.As(err, &ue), errors.As(err, &ie), errors.As(err, &ob), errors.As(err, &re), isCobraUsage(err):
		return exitUsage
	case errors.Is(err, context.Canceled):
		return 130
	}
	return exitFailure
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "rewind",
		Short: "Run one dataflow job under several recovery models and measure what each costs",
		Long: `rewind runs the same job through the same Arrow operators under different
recovery models (micro-batch seams, two-phase disk-to-disk, record-at-a-time
barriers, lineage rebuild) and reports latency while running and the bill
after a crash.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newResolveCmd(stdout, stderr))
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error { return usageError{flagError(cmd, err)} })
	benchCmd := newBenchCmd(stdout, stderr)
	benchCmd.AddCommand(newBenchCompareCmd(stdout), newBenchCostCmd(stdout, stderr),
		newBenchLatencyCmd(stdout, stderr), newBenchStateCmd(stdout, stderr))
	root.AddCommand(newRunCmd(stdout, stderr), benchCmd, newTraceCmd(stdout, stderr), newInspectCmd(), newWorkerCmd(stderr))
	return root
}

// pflagInvalid is how pflag reports a value its parser refused, with the
// parser's own text last ("strconv.ParseInt: parsing \"two\": invalid
// syntax").
var pflagInvalid = regexp.MustCompile(`^invalid argument "(.*)" for "(?:-\w, )?--([\w-]+)" flag: `)

// flagError rewrites pflag's error for a value it could not parse into one
// line saying which flag, what was given and what is allowed; other flag
// errors pass unchanged.
func flagError(cmd *cobra.Command, err error) error {
	m := pflagInvalid.FindStringSubmatch(err.Error())
	if m == nil {
		return err
	}
	value, name := m[1], m[2]
	want := "see rewind " + cmd.Name() + " --help"
	if fl := cmd.Flags().Lookup(name); fl != nil {
		switch fl.Value.Type() {
		case "int", "int64":
			want = "want a whole number"
			if strings.Contains(err.Error(), "value out of range") {
				want = "out of range; want a smaller whole number"
			}
		case "duration":
			want = "want a duration with a unit, such as 500ms, 2s or 1m30s"
		case "bool":
			want = "want true or false"
		}
	}
	return fmt.Errorf("invalid --%s %q: %s", name, value, want)
}

// isCobraUsage recognises cobra's own argument errors (unknown command,
// wrong number of arguments), which do not go through the flag error func.
func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "accepts ", "requires at least", "unknown flag", "unknown shorthand"} {
		if strings.Contains(msg, p) {
			return true
		}
	}
	return false
}
