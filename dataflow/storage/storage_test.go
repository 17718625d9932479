package storage_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/rewind-engine/rewind/dataflow/storage"
	"github.com/rewind-engine/rewind/dataflow/storage/storagetest"
)

// childModeEnv switches the test binary into a helper child process (see
// crash_test.go) instead of running tests.
const childModeEnv = "REWIND_STORAGE_TEST_CHILD"

func TestMain(m *testing.M) {
	if mode := os.Getenv(childModeEnv); mode != "" {
		os.Exit(runChild(mode))
	}
	code := m.Run()
	stopS3Server()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: goroutines leaked after the tests: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func openLocalTest(t testing.TB, dir string) storage.Store {
	t.Helper()
	st, err := storage.Open(testCtx(t), dir, storage.Options{})
	if err != nil {
		t.Fatalf("Open(%q): %v", dir, err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func TestLocalConformance(t *testing.T) {
	storagetest.Run(t, func(t *testing.T) storage.Store {
		return openLocalTest(t, t.TempDir())
	})
}

func TestOpenLocalForms(t *testing.T) {
	base := t.TempDir()
	t.Chdir(base)
	ctx := testCtx(t)

	rel, err := storage.Open(ctx, "file://./rewind-data", storage.Options{})
	if err != nil {
		t.Fatalf("Open(file://./rewind-data): %v", err)
	}
	defer rel.Close()
	want := filepath.Join(base, "rewind-data")
	if fi, err := os.Stat(want); err != nil || !fi.IsDir() {
		t.Fatalf("file://./rewind-data did not create %s: %v", want, err)
	}
	if rel.URL() != "file://"+filepath.ToSlash(want) {
		t.Fatalf("URL() = %q, want file://%s", rel.URL(), want)
	}
	if err := rel.Put(ctx, "x/y", []byte("hello")); err != nil {
		t.Fatal(err)
	}

	// The same directory through the other accepted forms.
	for _, form := range []string{"file://" + want, want, "rewind-data", "./rewind-data/", "FILE://" + want} {
		st, err := storage.Open(ctx, form, storage.Options{})
		if err != nil {
			t.Fatalf("Open(%q): %v", form, err)
		}
		got, err := st.Get(ctx, "x/y")
		if err != nil || string(got) != "hello" {
			t.Fatalf("Open(%q).Get(x/y) = %q, %v; want the object put through file://./rewind-data", form, got, err)
		}
		if st.URL() != rel.URL() {
			t.Errorf("Open(%q).URL() = %q, want %q", form, st.URL(), rel.URL())
		}
		_ = st.Close()
	}

	nested := filepath.Join(base, "deep", "er", "store")
	st, err := storage.Open(ctx, "file://"+nested, storage.Options{})
	if err != nil {
		t.Fatalf("Open(file://%s): %v", nested, err)
	}
	_ = st.Close()
	if _, err := os.Stat(nested); err != nil {
		t.Fatalf("nested directory not created: %v", err)
	}
}

func TestOpenRejects(t *testing.T) {
	ctx := testCtx(t)
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{
		"":              "accepted forms",
		"   ":           "accepted forms",
		"ftp://host/x":  "accepted forms",
		"http://host/x": "accepted forms",
		"file://":       "accepted forms",
		"s3://":         "no bucket",
		"s3:///prefix":  "no bucket",
		"s3://b/../x":   "bad prefix",
		file:            "not a directory",
	}
	for url, want := range cases {
		st, err := storage.Open(ctx, url, storage.Options{Endpoint: "http://127.0.0.1:1"})
		if err == nil {
			_ = st.Close()
			t.Errorf("Open(%q) succeeded, want an error", url)
			continue
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Open(%q) error %q does not mention %q", url, err, want)
		}
	}
}

func TestLocalLayoutAndPruning(t *testing.T) {
	root := t.TempDir()
	st := openLocalTest(t, root)
	ctx := testCtx(t)
	payload := []byte("payload bytes")
	if err := st.Put(ctx, "chk/7/op-2/kg-13", payload); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(root, "chk", "7", "op-2", "kg-13"))
	if err != nil {
		t.Fatalf("object file not where expected: %v", err)
	}
	if fi.Size() != int64(len(payload))+storage.TrailerSize {
		t.Fatalf("object file has %d bytes, want payload %d + trailer %d", fi.Size(), len(payload), storage.TrailerSize)
	}
	if left := tmpFiles(t, root); len(left) > 0 {
		t.Fatalf("temporary files left after Put: %q", left)
	}
	if err := st.Put(ctx, "chk/8/keep", payload); err != nil {
		t.Fatal(err)
	}
	if err := st.Delete(ctx, "chk/7/op-2/kg-13"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "chk", "7")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("empty directories of a deleted object were not pruned: stat chk/7: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "chk", "8", "keep")); err != nil {
		t.Fatalf("pruning removed a sibling: %v", err)
	}
	if _, err := os.Stat(root); err != nil {
		t.Fatalf("pruning removed the root: %v", err)
	}
}

func TestLocalNamesStayInsideRoot(t *testing.T) {
	parent := t.TempDir()
	root := filepath.Join(parent, "store")
	st := openLocalTest(t, root)
	ctx := testCtx(t)
	for _, name := range []string{"../escape", "a/../../escape", "/escape", filepath.Join(parent, "escape")} {
		if err := st.Put(ctx, name, []byte("x")); err == nil {
			t.Errorf("Put(%q) succeeded", name)
		}
	}
	if _, err := st.List(ctx, "../"); err != nil {
		t.Errorf("List(../): %v", err)
	}
	entries, err := os.ReadDir(parent)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "store" {
		var got []string
		for _, e := range entries {
			got = append(got, e.Name())
		}
		t.Fatalf("files appeared outside the store root: %q", got)
	}
}

// tmpFiles lists the ".tmp-" files under root, relative to it.
func tmpFiles(t testing.TB, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasPrefix(d.Name(), storage.TmpPrefix) {
			rel, _ := filepath.Rel(root, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// deadPid returns the pid of a process that has exited.
func deadPid(t *testing.T) int {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), childModeEnv+"=exit")
	if err := cmd.Run(); err != nil {
		t.Fatalf("running a short-lived child: %v", err)
	}
	return cmd.Process.Pid
}

func TestLocalOpenRemovesStaleTmp(t *testing.T) {
	root := t.TempDir()
	write := func(rel string, age time.Duration) {
		p := filepath.Join(root, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
		if age > 0 {
			old := time.Now().Add(-age)
			if err := os.Chtimes(p, old, old); err != nil {
				t.Fatal(err)
			}
		}
	}
	dead := strconv.Itoa(deadPid(t))
	self := strconv.Itoa(os.Getpid())
	write(".tmp-"+dead+"-abc", 0)               // writer killed
	write("sub/dir/.tmp-"+dead+"-def", 0)       // deep, writer killed
	write(".tmp-garbage", 0)                    // not our format
	write("sub/.tmp-"+self+"-old", 2*time.Hour) // live pid but far too old: pid reuse
	write("sub/.tmp-"+self+"-live", 0)          // a live writer in this process
	st := openLocalTest(t, root)
	if err := st.(storage.RawAccess).RawPut(testCtx(t), "sub/obj", []byte("kept")); err != nil {
		t.Fatal(err)
	}

	st2 := openLocalTest(t, root)
	left := strings.Join(tmpFiles(t, root), ",")
	if left != "sub/.tmp-"+self+"-live" {
		t.Fatalf("after Open the temporary files are %q, want only the live writer's", left)
	}
	if b, err := st2.(storage.RawAccess).RawGet(testCtx(t), "sub/obj"); err != nil || string(b) != "kept" {
		t.Fatalf("Open touched a real object: %q, %v", b, err)
	}
	objs, err := st2.List(testCtx(t), "")
	if err != nil || len(objs) != 1 || objs[0].Name != "sub/obj" {
		t.Fatalf("List = %v, %v; want only sub/obj (temporary files hidden)", objs, err)
	}
}
