package fault

import (
	"strings"
	"testing"
)

// FuzzParse: a --fail value either parses to a spec whose canonical text
// parses to the same spec, or fails with one line that quotes the value;
// never a panic.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"worker=1,after-records=100", "worker=0,after-records=5,after-point=batch.after-commit",
		"point=checkpoint.after-metadata,occurrence=8,kill=process", "point=x", "point=x,worker=1", "occurrence=2",
		"worker=-1,after-records=1", "worker=1,worker=2", "kill=process", " point = a ",
		"worker=0,at=4.5s", "worker=1,at=300ms,after-point=x", "worker=0,at=1s,after-records=5", "worker=0,at=-1s", "worker=0,at=0s",
		"worker=1,at-point=x", "worker=0,at-point=x,occurrence=3,after-point=y", "worker=0,at-point=x,after-records=2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		s, err := Parse(text)
		if err != nil {
			if msg := err.Error(); strings.Contains(msg, "\n") && !strings.Contains(text, "\n") {
				t.Fatalf("error is not one line: %q", msg)
			}
			return
		}
		back, err := Parse(s.String())
		if err != nil {
			t.Fatalf("%q parsed as %+v, whose text %q does not parse: %v", text, s, s.String(), err)
		}
		if back != s {
			t.Fatalf("%q parsed as %+v, its text %q as %+v", text, s, s.String(), back)
		}
	})
}
