package soak

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// BadInput is a command the binary must refuse: with exit code 2 for a
// usage error, 1 for a runtime one, and one clear line.
type BadInput struct {
	What string
	Args []string // after `rewind`; {dir} is replaced by a scratch directory
	Want []int    // acceptable exit codes
}

// BadInputs is the campaign's own list of bad inputs.
var BadInputs = []BadInput{
	{"unknown flag", []string{"run", "--no-such-flag"}, []int{2}},
	{"unknown executor", []string{"run", "--executor", "nosuch"}, []int{2}},
	{"unknown job", []string{"run", "--job", "nosuch"}, []int{2}},
	{"unknown sink mode", []string{"run", "--sink-mode", "exactly-twice"}, []int{2}},
	{"unknown output format", []string{"run", "--output-format", "xml"}, []int{2}},
	{"parallelism 0", []string{"run", "--parallelism", "0"}, []int{2}},
	{"negative window", []string{"run", "--job", "windowed-sum", "--window", "-1s"}, []int{2}},
	{"microbatch's --trigger with recordwise", []string{"run", "--executor", "recordwise", "--trigger", "50ms"}, []int{2}},
	{"recordwise's --barriers with microbatch", []string{"run", "--executor", "microbatch", "--barriers", "unaligned"}, []int{2}},
	{"recordwise's --checkpoint-interval with diskphase", []string{"run", "--executor", "diskphase", "--checkpoint-interval", "1s"}, []int{2}},
	{"diskphase's --job-records with microbatch", []string{"run", "--executor", "microbatch", "--job-records", "100"}, []int{2}},
	{"malformed gen spec", []string{"run", "--input", "gen:records=abc"}, []int{2}},
	{"unknown gen key", []string{"run", "--input", "gen:rows=10"}, []int{2}},
	{"unknown input scheme", []string{"run", "--input", "ftp:x"}, []int{2}},
	{"join without payments", []string{"run", "--job", "join", "--input", "orders=gen:records=10"}, []int{2}},
	{"malformed --fail", []string{"run", "--fail", "worker=x"}, []int{2}},
	{"unknown crash point", []string{"run", "--fail", "point=nope"}, []int{2}},
	{"run point without kill=process", []string{"run", "--fail", "point=run.before-finish"}, []int{2}},
	{"worker that does not exist", []string{"run", "--parallelism", "2", "--fail", "worker=5,after-records=10"}, []int{2}},
	{"missing input file", []string{"run", "--input", "file:{dir}/no-such.csv"}, []int{1, 2}},
	{"malformed CSV input file", []string{"run", "--input", "file:{dir}/bad.csv"}, []int{1}},
	{"CSV input with a non-number", []string{"run", "--input", "file:{dir}/nan.csv"}, []int{1}},
	{"resume with no run recorded", []string{"run", "--resume"}, []int{2}},
	{"unreachable S3 endpoint", []string{"run", "--storage", "s3://b/p", "--s3-endpoint", "http://127.0.0.1:1"}, []int{1}},
	{"S3 endpoint without a scheme (loopback: taken as http, then unreachable)", []string{"run", "--storage", "s3://b/p", "--s3-endpoint", "127.0.0.1:1"}, []int{1}},
	{"S3 endpoint without a scheme, not loopback", []string{"run", "--storage", "s3://b/p", "--s3-endpoint", "example.com:9000"}, []int{2}},
	{"unknown storage scheme", []string{"run", "--storage", "ftp://x"}, []int{2}},
	{"inspect of missing storage", []string{"inspect", "--storage", "{dir}/no-such-store"}, []int{1, 2}},
	{"unknown subcommand", []string{"nosuch"}, []int{2}},
}

// BadInputResult is what the binary did with one bad input.
type BadInputResult struct {
	BadInput
	Exit     int
	Line     string // the first line of standard error
	Lines    int    // lines on standard error
	TimedOut bool
}

// AsExpected says whether the binary refused the input as it should: an
// accepted exit code and one line.
func (b BadInputResult) AsExpected() bool {
	return !b.TimedOut && slices.Contains(b.Want, b.Exit) && b.Lines == 1
}

// RunBadInputs runs every bad input through the binary, each with a
// small input, scratch output and storage, and no progress display.
func RunBadInputs(ctx context.Context, bin, work string) []BadInputResult {
	dir, err := os.MkdirTemp(work, "bad-")
	if err != nil {
		return []BadInputResult{{BadInput: BadInput{What: "scratch directory"}, Exit: -1, Line: err.Error()}}
	}
	defer os.RemoveAll(dir)
	os.WriteFile(filepath.Join(dir, "bad.csv"), []byte("id,key,value,ts\n1,2\n\"3,4,5,6\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "nan.csv"), []byte("id,key,value,ts\n1,2,abc,4\n"), 0o644)
	var out []BadInputResult
	for i, b := range BadInputs {
		args := make([]string, len(b.Args))
		for j, a := range b.Args {
			args[j] = strings.ReplaceAll(a, "{dir}", dir)
		}
		if args[0] == "run" {
			// Small enough that an accepted input ends at once.
			sub := filepath.Join(dir, fmt.Sprint(i))
			if !slices.Contains(args, "--input") {
				args = append(args, "--input", "gen:records=100,keys=10")
			}
			args = append(args, "--output", filepath.Join(sub, "out"), "--progress", "none")
			if !slices.Contains(args, "--storage") {
				args = append(args, "--storage", filepath.Join(sub, "store"))
			}
		}
		p := startProc(ctx, bin, nil, args, 0, 30*time.Second)
		r := BadInputResult{BadInput: b, Exit: p.Exit, TimedOut: p.TimedOut}
		// The run id line is not part of the error.
		lines := p.Lines()
		r.Lines = len(lines)
		if len(lines) > 0 {
			r.Line = strings.ReplaceAll(lines[0], dir, "DIR")
		}
		out = append(out, r)
	}
	return out
}
