package operator_test

import (
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// checkedMem is an allocator that fails the test unless every byte taken
// from it was given back by the time the test (and its deferred Closes)
// ended.
func checkedMem(t testing.TB) *memory.CheckedAllocator {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	return mem
}

// wantMentions fails the test unless err is an error whose message contains
// every one of phrases: the constructors' errors must name what is wrong
// (the column, its type, the schema they looked in). what says which case
// it is.
func wantMentions(t testing.TB, what string, err error, phrases []string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error", what)
		return
	}
	for _, p := range phrases {
		if !strings.Contains(err.Error(), p) {
			t.Errorf("%s: error %q does not mention %q", what, err, p)
		}
	}
}
