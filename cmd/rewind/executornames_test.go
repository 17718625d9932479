package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// module is the import path of the repository's root.
const module = "github.com/rewind-engine/rewind"

// TestNoExecutorNamesOutsideTheRegistry: code shared by the executors asks
// an executor's run.Traits and Options what it can do, never its name. So
// no string literal that is an executor's name (alone, or in a list such
// as "a,b/variant"; prose with spaces, help and messages, may name them)
// appears in a non-test Go file, except in this
// package's registry.go and in the executors' own packages.
//
// soak/ is exempt: it drives the built binary from outside, like a user's
// script, so it writes command lines (--executor NAME with that
// executor's flags) as a user would, and checks the CLI's own refusals.
func TestNoExecutorNamesOutsideTheRegistry(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	allowed := []string{filepath.Join(root, "cmd", "rewind", "registry.go"), filepath.Join(root, "soak") + string(filepath.Separator)}
	for _, e := range registry {
		pkg := reflect.TypeOf(e).PkgPath()
		rel, ok := strings.CutPrefix(pkg, module+"/")
		if !ok {
			t.Fatalf("executor %s is in package %s, outside the module", e.Name(), pkg)
		}
		allowed = append(allowed, filepath.Join(root, filepath.FromSlash(rel))+string(filepath.Separator))
	}
	names := executorNames()
	var offenders []string
	files := 0
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
		if slices.ContainsFunc(allowed, func(a string) bool { return path == a || strings.HasPrefix(path, a) }) {
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
		ast.Inspect(f, func(n ast.Node) bool {
			if _, ok := n.(*ast.ImportSpec); ok {
				return false // an import path names a package, not an executor
			}
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			v, err := strconv.Unquote(lit.Value)
			if err != nil || strings.ContainsFunc(v, unicode.IsSpace) {
				return true // prose (help, messages) may mention executors
			}
			for _, part := range strings.FieldsFunc(v, func(r rune) bool { return r == ',' || r == '/' }) {
				if slices.Contains(names, part) {
					pos := fset.Position(lit.Pos())
					rel, _ := filepath.Rel(root, pos.Filename)
					offenders = append(offenders, rel+":"+strconv.Itoa(pos.Line)+": "+lit.Value)
					break
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 20 {
		t.Fatalf("only %d Go files checked under %s: the walk missed the repository", files, root)
	}
	if len(offenders) > 0 {
		t.Errorf("executor names in string literals outside %s and the executors' packages (ask run.Traits or Options instead):\n%s",
			"cmd/rewind/registry.go", strings.Join(offenders, "\n"))
	}
}
