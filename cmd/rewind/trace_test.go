package main

import (
	"encoding/xml"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/rewind-engine/rewind/dataflow/spacetime/diagram"
)

// trace --help shows the defaults trace runs with, not run's.
func TestTraceHelpShowsItsOwnDefaults(t *testing.T) {
	code, stdout, stderr := rewind(t, "trace", "--help")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for name, v := range traceDefaults {
		re := regexp.MustCompile(`--` + name + ` \S+ .*\(default ` + regexp.QuoteMeta(v) + `\)`)
		if !re.MatchString(stdout) {
			t.Errorf("--help does not show --%s's trace default %s:\n%s", name, v, stdout)
		}
	}
	for name, runs := range map[string]string{"checkpoint-interval": "1s", "trigger": "100ms", "job-records": "0"} {
		if regexp.MustCompile(`--` + name + ` \S+ .*\(default ` + runs + `\)`).MatchString(stdout) {
			t.Errorf("--help shows run's default %s for --%s", runs, name)
		}
	}
	if strings.Contains(stdout, "--summary") {
		t.Errorf("--help names --summary, a flag trace does not have")
	}
}

// The defaults shown are the ones used: a 400 ms run at the 100 ms
// interval takes several checkpoints, where run's 1 s would take none
// before the end.
func TestTraceRunsWithItsDefaults(t *testing.T) {
	code, stdout, stderr := rewind(t, "trace", "--format", "log", "--fail", "none")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, "checkpoint 2 COMPLETED") {
		t.Fatalf("no second checkpoint in a 400 ms trace at its 100 ms default:\n%s", stdout)
	}
}

// Every format: text fits 80 columns and points at no --summary; svg is
// XML; json reads back; html holds an svg and loads nothing.
func TestTraceFormats(t *testing.T) {
	dir := t.TempDir()
	for _, format := range traceFormats {
		path := filepath.Join(dir, "trace."+format)
		code, stdout, stderr := rewind(t, "trace", "--format", format, "--out", path)
		if code != 0 {
			t.Fatalf("--format %s: exit %d: %s", format, code, stderr)
		}
		if stdout != "" || !strings.Contains(stderr, "wrote the "+format+" trace to "+path) {
			t.Fatalf("--format %s --out: stdout %q, stderr %q", format, stdout, stderr)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		out := string(data)
		if strings.Contains(out, "--summary") {
			t.Errorf("--format %s points at --summary, a flag trace does not have:\n%s", format, out)
		}
		switch format {
		case "text":
			for _, line := range strings.Split(out, "\n") {
				if n := utf8.RuneCountInString(line); n > traceWidth {
					t.Errorf("a text line of %d columns: %s", n, line)
				}
			}
			if strings.Contains(out, "\x1b[") {
				t.Errorf("colour in a file")
			}
			if !strings.Contains(out, "result: equals the reference executor's") {
				t.Errorf("text has no result:\n%s", out)
			}
		case "svg", "html":
			if format == "html" {
				i, j := strings.Index(out, "<svg"), strings.Index(out, "</svg>")
				if i < 0 || j < i {
					t.Fatalf("html holds no svg")
				}
				if regexp.MustCompile(`(?i)(src|href)\s*=\s*["']?https?:|<script|<link`).MatchString(out) {
					t.Fatalf("html loads something")
				}
				out = out[i : j+len("</svg>")]
			}
			dec := xml.NewDecoder(strings.NewReader(out))
			for {
				if _, err := dec.Token(); err == io.EOF {
					break
				} else if err != nil {
					t.Fatalf("--format %s: not XML: %v", format, err)
				}
			}
		case "json":
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			_, err = diagram.ReadJSON(f)
			f.Close()
			if err != nil {
				t.Fatalf("--format json: %v", err)
			}
		}
	}
	if code, _, stderr := rewind(t, "trace", "--out", filepath.Join(dir, "no", "such", "dir", "t.svg")); code != exitUsage || !strings.Contains(stderr, "invalid --out") {
		t.Errorf("--out in no directory: exit %d, %s", code, stderr)
	}
	if code, _, stderr := rewind(t, "trace", "--format", "png"); code != exitUsage || !strings.Contains(stderr, "invalid --format \"png\": allowed are text, svg") {
		t.Errorf("--format png: exit %d, %s", code, stderr)
	}
}

func TestFitLineFoldsAtSpaces(t *testing.T) {
	in := "  note: " + strings.Repeat("word ", 40) + strings.Repeat("x", 100)
	out := fitLine(in, 30)
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if n := utf8.RuneCountInString(l); n > 30 {
			t.Fatalf("a line of %d runes: %q", n, l)
		}
	}
	if strings.Join(strings.Fields(out), "") != strings.Join(strings.Fields(in), "") {
		t.Fatalf("folding lost text:\n%s", out)
	}
	if fitLine("short", 30) != "short\n" {
		t.Fatal("a short line changed")
	}
}

// Trace's default microbatch crash lands inside a batch, so the two
// lost-piece recoveries tell different stories: lineage rebuilds only the
// dead worker's piece, rerun-batch every piece of the batch.
func TestTraceMicrobatchCrashInsideABatch(t *testing.T) {
	rebuilt := map[string]int{}
	for _, mode := range []string{"lineage", "rerun-batch"} {
		code, stdout, stderr := rewind(t, "trace", "--executor", "microbatch", "--lost-piece-recovery", mode)
		if code != 0 {
			t.Fatalf("trace --lost-piece-recovery %s: exit %d\n%s", mode, code, stderr)
		}
		if !strings.Contains(stdout, "crash: point=batch.mid-run,worker=1") {
			t.Fatalf("%s: the default crash is not inside a batch:\n%s", mode, stdout)
		}
		var lost, n int
		var records int64
		at := strings.Index(stdout, "lost pieces ("+mode+"):")
		if at < 0 {
			t.Fatalf("%s: no lost-piece line:\n%s", mode, stdout)
		}
		line := stdout[at:]
		if _, err := fmt.Sscanf(line, "lost pieces ("+mode+"): %d lost, %d rebuilt, %d records", &lost, &n, &records); err != nil || lost < 1 {
			t.Fatalf("%s: no lost-piece line (%v):\n%s", mode, err, stdout)
		}
		rebuilt[mode] = n
	}
	if rebuilt["rerun-batch"] <= rebuilt["lineage"] {
		t.Errorf("rerun-batch rebuilt %d pieces, lineage %d: the crash inside a batch should make rerun-batch redo more", rebuilt["rerun-batch"], rebuilt["lineage"])
	}
}
