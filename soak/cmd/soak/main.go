// Command soak runs rewind's reliability campaign (package soak) with a
// built rewind binary and writes its report.
//
//	go run ./soak/cmd/soak -bin ./bin/rewind -schedules 1000 -seed 7 -parallel 2 -report docs/reliability.md
//	go run ./soak/cmd/soak -bin ./bin/rewind -seed 7 -only 1234      # replay one schedule
//
// It exits 1 if any schedule failed (a silent wrong result included) or a
// bad input was not refused as it should be, 2 on wrong flags.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rewind-engine/rewind/soak"
)

func main() { os.Exit(run()) }

func run() int {
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	bin := fs.String("bin", "", "the rewind binary (go build -o BIN ./cmd/rewind); required")
	perMode := fs.Int("schedules", 50, "schedules per executor and barrier mode")
	seed := fs.Uint64("seed", 0, "campaign seed (0: drawn from the clock, and printed)")
	only := fs.String("only", "", "run just these schedule indexes (comma-separated): replay")
	parallel := fs.Int("parallel", 2, "schedules run at the same time")
	limit := fs.Duration("limit", 90*time.Second, "longest a rewind process may run: longer is a hang")
	s3 := fs.String("s3", "", "scripts/s3-server.sh: start a private S3 server per slot and draw storage outages")
	work := fs.String("work", "", "scratch directory (default: a new temporary one, removed after)")
	keep := fs.Bool("keep", false, "keep the directories of failed schedules")
	report := fs.String("report", "", "write the markdown report here (docs/reliability.md)")
	badInputs := fs.Bool("bad-inputs", true, "run the bad-input table too")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return 2
	}
	if *bin == "" || fs.NArg() > 0 || *parallel < 1 || *perMode < 0 {
		fmt.Fprintln(os.Stderr, "soak: give -bin BIN (a built rewind), -parallel >= 1, -schedules >= 0 and no arguments")
		return 2
	}
	abs, err := filepath.Abs(*bin)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		return 2
	}
	if *seed == 0 {
		*seed = uint64(time.Now().UnixNano()%1_000_000) + 1
	}
	var idx []int
	if *only != "" {
		for _, f := range strings.Split(*only, ",") {
			i, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || i < 0 {
				fmt.Fprintf(os.Stderr, "soak: -only %q: give schedule indexes\n", *only)
				return 2
			}
			idx = append(idx, i)
		}
	}
	dir := *work
	if dir == "" {
		if dir, err = os.MkdirTemp("", "rewind-soak-"); err != nil {
			fmt.Fprintln(os.Stderr, "soak:", err)
			return 1
		}
		if !*keep {
			defer os.RemoveAll(dir)
		}
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		return 1
	}
	replay := "go run ./soak/cmd/soak -bin " + *bin
	if *s3 != "" {
		replay += " -s3 " + *s3
	}
	cfg := soak.Config{Bin: abs, Work: dir, Seed: *seed, PerMode: *perMode, Only: idx, Parallel: *parallel,
		Limit: *limit, S3Script: *s3, Keep: *keep, Log: os.Stderr, Replay: replay}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(os.Stderr, "soak: seed %d, %d schedules (%d modes), parallel %d, work in %s\n", *seed, len(cfg.Indexes()), len(soak.Modes), *parallel, dir)
	rep, err := soak.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "soak:", err)
		if rep == nil {
			return 1
		}
	}
	var bad []soak.BadInputResult
	if *badInputs && len(idx) == 0 {
		bad = soak.RunBadInputs(ctx, abs, dir)
	}
	fmt.Print(soak.Markdown(rep, bad, soak.Environment(*bin)))
	if *report != "" {
		if err := os.WriteFile(*report, []byte(soak.Markdown(rep, bad, soak.Environment(*bin))), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "soak:", err)
			return 1
		}
	}
	code := rep.ExitCode()
	for _, b := range bad {
		if !b.AsExpected() {
			code = 1
		}
	}
	if code != 0 {
		fmt.Fprintf(os.Stderr, "soak: FAILED: %d failed schedules (%d silent), seed %d; each is printed above with the command that replays it\n", rep.All.Failures, rep.All.Silent, *seed)
	}
	return code
}
