package report

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"
)

// Every event leads with executor, event and t_ms, in that order, then the
// event's own fields, whether they are a map or a struct.
func TestProgressLeadingFields(t *testing.T) {
	var b bytes.Buffer
	start := time.Now()
	p := NewProgress(&b, "microbatch", start)
	p.EmitAt("crash", start.Add(1500*time.Microsecond), map[string]any{"cause": "x"})
	p.EmitAt("checkpoint", start.Add(2*time.Second), struct {
		ID int `json:"id"`
	}{7})
	p.EmitAt("done", start, nil)
	want := `{"executor":"microbatch","event":"crash","t_ms":1.5,"cause":"x"}
{"executor":"microbatch","event":"checkpoint","t_ms":2000,"id":7}
{"executor":"microbatch","event":"done","t_ms":0}
`
	if b.String() != want {
		t.Fatalf("progress:\n%s\nwant:\n%s", b.String(), want)
	}
}

type failAfter struct {
	n   int
	got strings.Builder
}

func (w *failAfter) Write(p []byte) (int, error) {
	if w.n == 0 {
		return 0, errors.New("disk full")
	}
	w.n--
	return w.got.Write(p)
}

// The first failed write stops the stream: no event is written after a
// gap, and Err names the failure.
func TestProgressStopsAtFirstError(t *testing.T) {
	w := &failAfter{n: 1}
	p := NewProgress(w, "diskphase", time.Now())
	for range 3 {
		p.Emit("job_committed", map[string]any{"job": 1})
	}
	w.n = 10
	p.Emit("job_committed", map[string]any{"job": 2})
	if n := strings.Count(w.got.String(), "\n"); n != 1 || p.Err() == nil || p.Enabled() {
		t.Fatalf("%d lines written, err %v, enabled %v; want 1 line, then the stream stopped", n, p.Err(), p.Enabled())
	}
	if NewProgress(nil, "x", time.Now()).Enabled() {
		t.Fatal("a writer to nowhere says it is enabled")
	}
}
