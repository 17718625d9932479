package runtest

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/rewind-engine/rewind/dataflow/run"
)

// Alive says whether process pid exists and is not a zombie (/proc).
func Alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state ...: comm may hold spaces, the state follows ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// ChildrenOf lists the live processes whose parent is pid, from /proc.
func ChildrenOf(pid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		f := strings.Fields(s[i+1:])
		if len(f) > 1 && f[1] == strconv.Itoa(pid) && f[0] != "Z" {
			out = append(out, p)
		}
	}
	return out
}

// CheckNoOrphans fails t unless every worker process a run started
// (run.Fleet.Ended) is gone and none ended by itself with an error (a
// worker's leak check among them). It returns how many a SIGKILL ended.
func CheckNoOrphans(t testing.TB, ended []run.ProcEnd) (sigkilled int) {
	t.Helper()
	if len(ended) == 0 {
		t.Fatal("the run's worker processes were never started, or never closed")
	}
	for _, e := range ended {
		if Alive(e.Pid) {
			t.Errorf("worker %d (pid %d) outlived its run", e.ID, e.Pid)
		}
		if e.Signal == syscall.SIGKILL {
			sigkilled++
		}
		if e.Signal == 0 && e.Err != nil {
			t.Errorf("worker %d (pid %d) ended badly: %v", e.ID, e.Pid, e.Err)
		}
	}
	return sigkilled
}

// KillReplaceAndClose SIGKILLs fleet f's worker w, starts its
// replacement (whose acquire must be measured), closes the fleet, and
// checks that of the three processes it then started exactly the killed
// one ended by SIGKILL and none outlived it (CheckNoOrphans).
func KillReplaceAndClose(t testing.TB, f *run.Fleet, w int) {
	t.Helper()
	if _, _, err := f.Kill(w); err != nil {
		t.Fatal(err)
	}
	if acq, err := f.Replace(context.Background(), w); err != nil || acq <= 0 {
		t.Fatalf("replacement: acquire %v, %v", acq, err)
	}
	f.Close()
	if kills := CheckNoOrphans(t, f.Ended()); kills != 1 || len(f.Ended()) != 3 {
		t.Fatalf("%d of %d processes SIGKILLed, want 1 of 3", kills, len(f.Ended()))
	}
}
