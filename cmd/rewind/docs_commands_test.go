package main

// Every command the docs quote runs. The convention, for README.md and
// every docs/**/*.md:
//
//   - A quoted command is a line of a fenced block opened with ```sh
//     (or bash, shell, console) that starts with `rewind `, `$ rewind ` or
//     `go run ./cmd/rewind `. A trailing `# comment` is not part of it; a
//     comment saying `(exit N)` gives the exit status expected instead
//     of 0. Commands are plain words: quotes, `$`, pipes, `;`, `&` and
//     redirections are refused (a block that needs them is a script, below).
//   - TestDocsCommands runs each quoted command as the CLI (this test
//     binary re-executed, as killed_process_test does), one after the
//     other, each in a fresh directory holding an empty docs/figures/, and
//     checks its exit status. A command quoted twice runs once.
//   - A block whose fence is preceded by the line `<!-- docs: slow -->`
//     holds commands too slow for `make test` (the standard bench, runs of
//     millions of records): they are checked the same way, but only with
//     -docs.all, which `make docs` passes. A block preceded by
//     `<!-- docs: script -->` is a shell script (a kill -9 and a resume,
//     say): with -docs.all it runs whole under bash in a fresh directory,
//     with `rewind` on the PATH, and must exit 0 (its last command's status).
//   - Any other line of a shell block must be blank, a comment, or a build
//     command (`make`, `go build`, `go test`, `go vet`, `gofmt`, `git`),
//     which is the build itself and not run here. Anything else fails the
//     test: a command is either run, or explicitly marked, never skipped.
//   - With -docs.figures, the commands whose --out is under docs/figures/
//     run from the repository root instead, so they rewrite the committed
//     figures, and every SVG they write must parse as XML. `make docs`
//     (scripts/docs.sh) is that run.

import (
	"bufio"
	"encoding/xml"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

var (
	docsAll     = flag.Bool("docs.all", false, "also run the commands of blocks marked slow, and the script blocks (make docs)")
	docsFigures = flag.Bool("docs.figures", false, "run the commands writing under docs/figures/ from the repository root, regenerating the committed figures (make docs)")
)

// docCommand is one quoted command, or one script block.
type docCommand struct {
	where  string // FILE:LINE
	text   string // as quoted, without its comment
	args   []string
	exit   int
	marker string // "", "slow" or "script"
}

func (c docCommand) String() string { return c.where + ": " + c.text }

var (
	fenceLine   = regexp.MustCompile("^\\s*```\\s*([A-Za-z]*)")
	markerLine  = regexp.MustCompile(`^<!-- docs: (slow|script) -->$`)
	exitComment = regexp.MustCompile(`\(exit (\d+)\)`)
	shellLangs  = map[string]bool{"sh": true, "bash": true, "shell": true, "console": true}
	buildTools  = []string{"make ", "make\t", "go build", "go test", "go vet", "gofmt", "git "}
)

// repoRoot is the repository root, two levels above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("no go.mod at %s: %v", root, err)
	}
	return root
}

// docFiles are README.md and every docs/**/*.md, relative to root.
func docFiles(t *testing.T, root string) []string {
	t.Helper()
	files := []string{"README.md"}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			rel, err := filepath.Rel(root, p)
			files = append(files, rel)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// parseDocCommands reads the quoted commands of one markdown file; name
// is how its lines are cited.
func parseDocCommands(name string, r io.Reader) ([]docCommand, error) {
	var (
		cmds     []docCommand
		errs     []error
		inBlock  bool
		shell    bool
		marker   string
		script   strings.Builder
		scriptAt string
		prev     string // the last non-blank line before a fence
	)
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		where := fmt.Sprintf("%s:%d", name, n)
		if m := fenceLine.FindStringSubmatch(line); m != nil {
			if !inBlock {
				inBlock, shell, marker = true, shellLangs[m[1]], ""
				if mm := markerLine.FindStringSubmatch(strings.TrimSpace(prev)); mm != nil {
					marker = mm[1]
				}
				if marker != "" && !shell {
					errs = append(errs, fmt.Errorf("%s: a docs: %s marker on a block that is not sh", where, marker))
				}
				script.Reset()
				scriptAt = where
				continue
			}
			inBlock = false
			if shell && marker == "script" {
				cmds = append(cmds, docCommand{where: scriptAt, text: script.String(), marker: marker})
			}
			prev = line
			continue
		}
		if strings.TrimSpace(line) != "" {
			prev = line
		}
		if !inBlock || !shell {
			continue
		}
		if marker == "script" {
			script.WriteString(line + "\n")
			continue
		}
		c, ok, err := parseCommandLine(where, line)
		if err != nil {
			errs = append(errs, err)
		}
		if ok {
			c.marker = marker
			cmds = append(cmds, c)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if inBlock {
		errs = append(errs, fmt.Errorf("%s: a fenced block is never closed", name))
	}
	return cmds, errors.Join(errs...)
}

// parseCommandLine reads one line of a shell block: a quoted command
// (ok), a line the convention lets through (blank, comment, build
// tool), or an error.
func parseCommandLine(where, line string) (docCommand, bool, error) {
	text, comment := strings.TrimSpace(line), ""
	if text == "" || strings.HasPrefix(text, "#") {
		return docCommand{}, false, nil
	}
	text = strings.TrimPrefix(text, "$ ")
	if i := strings.Index(text, " #"); i >= 0 {
		text, comment = strings.TrimSpace(text[:i]), text[i+2:]
	}
	var args []string
	switch {
	case strings.HasPrefix(text, "rewind "), text == "rewind":
		args = strings.Fields(text)[1:]
	case strings.HasPrefix(text, "go run ./cmd/rewind"):
		args = strings.Fields(text)[3:]
	default:
		for _, tool := range buildTools {
			if strings.HasPrefix(text, tool) && !strings.Contains(text, "./cmd/rewind") {
				return docCommand{}, false, nil
			}
		}
		return docCommand{}, false, fmt.Errorf("%s: %q in a sh block is neither a rewind command nor a build command: fence it as text, or mark the block <!-- docs: script -->", where, text)
	}
	if strings.ContainsAny(text, "'\"$|;&<>`\\*?") {
		return docCommand{}, false, fmt.Errorf("%s: %q is not plain words (quotes, $, pipes, ;, &, redirections, globs, continuations): mark the block <!-- docs: script -->", where, text)
	}
	c := docCommand{where: where, text: text, args: args}
	if m := exitComment.FindStringSubmatch(comment); m != nil {
		c.exit, _ = strconv.Atoi(m[1])
	}
	return c, true, nil
}

// figureCommand says whether c writes under docs/figures/.
func figureCommand(c docCommand) bool {
	for i, a := range c.args {
		if (a == "--out" || a == "-o") && i+1 < len(c.args) && strings.HasPrefix(c.args[i+1], "docs/figures/") {
			return true
		}
		if strings.HasPrefix(a, "--out=docs/figures/") {
			return true
		}
	}
	return false
}

// TestDocsCommands runs every command quoted in the docs (see the top of
// this file).
func TestDocsCommands(t *testing.T) {
	root := repoRoot(t)
	var all []docCommand
	for _, f := range docFiles(t, root) {
		fh, err := os.Open(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		cmds, err := parseDocCommands(f, fh)
		fh.Close()
		if err != nil {
			t.Errorf("%v", err)
		}
		all = append(all, cmds...)
	}
	if len(all) == 0 {
		t.Fatal("no quoted commands found in the docs: the convention or the parser is broken")
	}
	ran, deferred := 0, 0
	seen := map[string]string{} // command text: where it ran
	for _, c := range all {
		if c.marker != "" && !*docsAll {
			deferred++
			continue
		}
		if first, ok := seen[c.text]; ok {
			t.Logf("%s: the same as %s, which ran", c.where, first)
			continue
		}
		seen[c.text] = c.where
		ran++
		start := time.Now()
		if c.marker == "script" {
			runDocScript(t, c)
		} else {
			runDocCommand(t, root, c)
		}
		t.Logf("%s (%.1f s)", c, time.Since(start).Seconds())
	}
	t.Logf("%d quoted commands run; %d in blocks marked slow or script, run by make docs (-docs.all)", ran, deferred)
}

// runDocCommand runs one quoted command and checks its exit status.
func runDocCommand(t *testing.T, root string, c docCommand) {
	t.Helper()
	dir := t.TempDir()
	if *docsFigures && figureCommand(c) {
		dir = root
	} else if err := os.MkdirAll(filepath.Join(dir, "docs", "figures"), 0o755); err != nil {
		t.Fatal(err)
	}
	limit := 2 * time.Minute
	if c.marker != "" {
		limit = 20 * time.Minute
	}
	p := startCLI(t, dir, c.args...)
	p.wait(t, limit)
	if got := p.state.ExitCode(); got != c.exit {
		t.Errorf("%s: exit status %d (%s), want %d; stderr:\n%s", c, got, p.state, c.exit, tail(p.stderr.String(), 2000))
		return
	}
	if dir == root {
		checkFigures(t, root, c)
	}
}

// checkFigures parses every SVG a figure command wrote as XML.
func checkFigures(t *testing.T, root string, c docCommand) {
	t.Helper()
	for i, a := range c.args {
		if (a != "--out" && a != "-o") || i+1 >= len(c.args) {
			continue
		}
		out := filepath.Join(root, c.args[i+1])
		svgs := []string{out}
		if st, err := os.Stat(out); err == nil && st.IsDir() {
			svgs, _ = filepath.Glob(filepath.Join(out, "*.svg"))
		}
		for _, f := range svgs {
			if !strings.HasSuffix(f, ".svg") {
				continue
			}
			if err := parseXML(f); err != nil {
				t.Errorf("%s: %s is not well-formed XML: %v", c, f, err)
			}
		}
	}
}

func parseXML(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	d := xml.NewDecoder(f)
	for {
		if _, err := d.Token(); err == io.EOF {
			return nil
		} else if err != nil {
			return err
		}
	}
}

// runDocScript runs a script block under bash, with `rewind` on the PATH
// (a wrapper re-executing this test binary as the CLI).
func runDocScript(t *testing.T, c docCommand) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin, dir := t.TempDir(), t.TempDir()
	wrapper := fmt.Sprintf("#!/bin/sh\n%s=1 exec %q \"$@\"\n", cliChildEnv, exe)
	if err := os.WriteFile(filepath.Join(bin, "rewind"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", "-c", c.text)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	cmd.WaitDelay = time.Minute
	done := make(chan struct{})
	var out []byte
	go func() {
		out, err = cmd.CombinedOutput()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(20 * time.Minute):
		_ = cmd.Process.Kill()
		<-done
		t.Fatalf("%s: still running after 20 min; killed", c.where)
	}
	if err != nil {
		t.Errorf("script block at %s: %v; output:\n%s", c.where, err, tail(string(out), 3000))
	}
}

// tail is the end of s, at most n bytes.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// TestDocsConvention: the parser finds what the convention says and
// refuses what it forbids.
func TestDocsConvention(t *testing.T) {
	doc := "text\n```sh\nrewind trace --format svg --out docs/figures/x.svg   # a figure\n$ rewind run --job nope  # (exit 2)\n" +
		"make test\n# a comment\n```\n\n<!-- docs: slow -->\n```sh\nrewind bench --repeat 3\n```\n" +
		"<!-- docs: script -->\n```sh\nrewind run &\nsleep 1; kill %1\n```\n```text\nrewind run --job a|b\n```\n"
	cmds, err := parseDocCommands("t.md", strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := []docCommand{
		{where: "t.md:3", text: "rewind trace --format svg --out docs/figures/x.svg", args: []string{"trace", "--format", "svg", "--out", "docs/figures/x.svg"}},
		{where: "t.md:4", text: "rewind run --job nope", args: []string{"run", "--job", "nope"}, exit: 2},
		{where: "t.md:11", text: "rewind bench --repeat 3", args: []string{"bench", "--repeat", "3"}, marker: "slow"},
		{where: "t.md:14", text: "rewind run &\nsleep 1; kill %1\n", marker: "script"},
	}
	if !reflect.DeepEqual(cmds, want) {
		t.Fatalf("parsed\n%#v\nwant\n%#v", cmds, want)
	}
	if !figureCommand(cmds[0]) || figureCommand(cmds[1]) {
		t.Errorf("figureCommand: %v %v, want true false", figureCommand(cmds[0]), figureCommand(cmds[1]))
	}
	for _, bad := range []string{"```sh\nrewind run &\n```\n", "```sh\ncurl x\n```\n", "```sh\nrewind run --input 'a b'\n```\n",
		"```sh\nrewind run \\\n```\n", "```sh\nrewind run\n"} {
		if _, err := parseDocCommands("bad.md", strings.NewReader(bad)); err == nil {
			t.Errorf("%q: accepted, want an error", bad)
		}
	}
}
