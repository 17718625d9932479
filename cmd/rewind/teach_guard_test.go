package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/rewind-engine/rewind/dataflow/mistake"
	"github.com/rewind-engine/rewind/dataflow/run"
)

// The wrong variants exist only under `rewind trace --teach`: run and
// bench take no flag that could name one and refuse --teach as a usage
// error.
func TestRunAndBenchCannotSwitchAMistakeOn(t *testing.T) {
	for _, cmd := range []*cobra.Command{newRunCmd(io.Discard, io.Discard), newBenchCmd(io.Discard, io.Discard)} {
		cmd.Flags().VisitAll(func(fl *pflag.Flag) {
			text := strings.ToLower(fl.Name + " " + fl.Usage)
			if strings.Contains(text, "teach") || strings.Contains(text, "mistake") {
				t.Errorf("rewind %s has a flag --%s (%q) that speaks of a mistake", cmd.Name(), fl.Name, fl.Usage)
			}
			for _, n := range mistake.All {
				if strings.Contains(text, string(n)) {
					t.Errorf("rewind %s has a flag --%s whose name or help names the mistake %s", cmd.Name(), fl.Name, n)
				}
			}
		})
		for _, n := range mistake.All {
			code, _, stderr := rewind(t, cmd.Name(), "--teach", string(n))
			if code != 2 || !strings.Contains(stderr, "--teach") {
				t.Errorf("rewind %s --teach %s: exit %d, want 2 with an unknown-flag error: %s", cmd.Name(), n, code, stderr)
			}
		}
	}
}

// No run.Config field and no executor's Options can carry a mistake: the
// only way in is run.Env.Mistake, which trace sets after Prepare.
func TestNoConfigOrOptionsCarriesAMistake(t *testing.T) {
	check := func(what string, typ reflect.Type) {
		if path := mistakeField(typ, what, map[reflect.Type]bool{}); path != "" {
			t.Errorf("%s can carry a mistake (%s): a mistake reaches an executor only through run.Env.Mistake", what, path)
		}
	}
	check("run.Config", reflect.TypeOf(run.Config{}))
	for _, e := range registry {
		if o := e.Traits().NoOptions; o != nil {
			check(e.Name()+"'s Options", reflect.TypeOf(o))
		}
	}
	// The check itself sees a mistake where there is one.
	if mistakeField(reflect.TypeOf(run.Env{}), "run.Env", map[reflect.Type]bool{}) == "" {
		t.Fatalf("the field check does not see run.Env.Mistake")
	}
}

// mistakeField is the path to a field of typ whose type comes from
// package mistake, or "".
func mistakeField(typ reflect.Type, path string, seen map[reflect.Type]bool) string {
	if seen[typ] {
		return ""
	}
	seen[typ] = true
	if typ.PkgPath() == module+"/dataflow/mistake" {
		return path
	}
	switch typ.Kind() {
	case reflect.Pointer, reflect.Slice, reflect.Array:
		return mistakeField(typ.Elem(), path+"[]", seen)
	case reflect.Map:
		if p := mistakeField(typ.Key(), path+"{key}", seen); p != "" {
			return p
		}
		return mistakeField(typ.Elem(), path+"{}", seen)
	case reflect.Struct:
		for i := range typ.NumField() {
			f := typ.Field(i)
			if p := mistakeField(f.Type, path+"."+f.Name, seen); p != "" {
				return p
			}
		}
	}
	return ""
}

// mistakeFiles are where code may refer to the mistakes: the package
// itself, the contract in run (Env.Mistake, Traits.Mistakes), the teach
// modes and trace's run step, and each executor's own mistake files
// (mistake*.go in its package).
func mistakeFiles(root string) []string {
	allowed := []string{
		filepath.Join(root, "dataflow", "mistake") + string(filepath.Separator),
		filepath.Join(root, "dataflow", "run", "run.go"),
		filepath.Join(root, "dataflow", "run", "executor.go"),
		filepath.Join(root, "cmd", "rewind", "teach"),
		filepath.Join(root, "cmd", "rewind", "traced.go"),
	}
	for _, e := range registry {
		rel, _ := strings.CutPrefix(reflect.TypeOf(e).PkgPath(), module+"/")
		allowed = append(allowed, filepath.Join(root, filepath.FromSlash(rel), "mistake"))
	}
	return allowed
}

// TestMistakesAreWiredOnlyWhereAllowed: no other non-test file imports
// package mistake or reads an Env's Mistake, so a mistake cannot leak
// into an ordinary run by a second path.
func TestMistakesAreWiredOnlyWhereAllowed(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	offenders, files, err := mistakeReferences(root, mistakeFiles(root))
	if err != nil {
		t.Fatal(err)
	}
	if files < 20 {
		t.Fatalf("only %d Go files checked under %s: the walk missed the repository", files, root)
	}
	if len(offenders) > 0 {
		t.Errorf("references to the mistakes outside cmd/rewind/teach*.go, cmd/rewind/traced.go and the executors' mistake*.go:\n%s",
			strings.Join(offenders, "\n"))
	}
	// The scan sees the references where they are allowed.
	if seen, _, _ := mistakeReferences(root, nil); !slices.ContainsFunc(seen, func(s string) bool { return strings.HasPrefix(s, filepath.Join("cmd", "rewind", "traced.go")) }) {
		t.Fatalf("the scan does not see env.Mistake in cmd/rewind/traced.go: %v", seen)
	}
}

// mistakeReferences lists, file:line, every import of package mistake and
// every selector .Mistake in the non-test Go files under root outside
// allowed (path prefixes).
func mistakeReferences(root string, allowed []string) (offenders []string, files int, err error) {
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		if slices.ContainsFunc(allowed, func(a string) bool { return strings.HasPrefix(path, a) }) {
			return nil
		}
		files++
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		at := func(n ast.Node, what string) {
			pos := fset.Position(n.Pos())
			rel, _ := filepath.Rel(root, pos.Filename)
			offenders = append(offenders, rel+":"+strconv.Itoa(pos.Line)+": "+what)
		}
		for _, imp := range f.Imports {
			if p, _ := strconv.Unquote(imp.Path.Value); p == module+"/dataflow/mistake" {
				at(imp, "imports package mistake")
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "Mistake" {
				at(sel, "reads .Mistake")
			}
			return true
		})
		return nil
	})
	return offenders, files, err
}
