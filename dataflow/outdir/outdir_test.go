package outdir

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestLock(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	unlock, err := Lock(dir)
	if err != nil {
		t.Fatal(err)
	}
	if busy, err := InUse(dir); err != nil || busy {
		t.Fatalf("a directory holding only the lock: in use %v, %v; want not in use", busy, err)
	}
	// flock locks belong to the open file, so a second open in this process
	// conflicts as another process would.
	if _, err := Lock(dir); !errors.Is(err, ErrLocked) {
		t.Fatalf("second lock: %v, want ErrLocked", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "part-0.csv"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := Clear(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, LockName)); err != nil {
		t.Fatalf("Clear removed the lock file: %v", err)
	}
	unlock()
	again, err := Lock(dir)
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	again()
}
