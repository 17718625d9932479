package barrier

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/rewind-engine/rewind/recordwise/checkpoint"
)

// TestDataDriven runs the scripts in testdata/, one file per scenario
// family. Commands:
//
//	new channels=N mode=aligned|unaligned|timeout=<duration>
//	step
//	<one input per line: record ch=C v=V [records=R] [bytes=B],
//	 barrier ch=C cp=N, end ch=C, timer cp=N, cancel cp=N>
//
// step prints each input, the actions it produced (indented) and the state
// the handler is left in. Rewrite the expected output with -rewrite.
func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var h *Handler[int]
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			switch td.Cmd {
			case "new":
				var n int
				var mode string
				td.ScanArgs(t, "channels", &n)
				td.ScanArgs(t, "mode", &mode)
				m, err := parseTestMode(mode)
				if err != nil {
					td.Fatalf(t, "%v", err)
				}
				if h, err = New[int](n, m); err != nil {
					td.Fatalf(t, "%v", err)
				}
				return fmt.Sprintf("%d channels, %v\n", n, m)
			case "step":
				if h == nil {
					td.Fatalf(t, "step before new")
				}
				var b strings.Builder
				for _, line := range strings.Split(strings.TrimSpace(td.Input), "\n") {
					in, err := parseInput(line)
					if err != nil {
						td.Fatalf(t, "%s: %v", line, err)
					}
					fmt.Fprintf(&b, "%v\n", in)
					for _, a := range h.Step(in) {
						fmt.Fprintf(&b, "  %v\n", a)
					}
				}
				fmt.Fprintf(&b, "state: %s", h.State())
				if id, ok := h.Pending(); ok {
					fmt.Fprintf(&b, " (checkpoint %d", id)
					var blocked []string
					for c := range h.closed {
						if h.Blocked(Channel(c)) {
							blocked = append(blocked, strconv.Itoa(c))
						}
					}
					if len(blocked) > 0 {
						fmt.Fprintf(&b, ", blocked %s", strings.Join(blocked, ","))
					}
					if q := h.Queued(); q > 0 {
						fmt.Fprintf(&b, ", %d queued", q)
					}
					b.WriteString(")")
				}
				return b.String() + "\n"
			}
			td.Fatalf(t, "unknown command %q", td.Cmd)
			return ""
		})
	})
}

func parseTestMode(s string) (Mode, error) {
	switch {
	case s == "aligned":
		return Aligned(), nil
	case s == "unaligned":
		return Unaligned(), nil
	case strings.HasPrefix(s, "timeout="):
		d, err := time.ParseDuration(strings.TrimPrefix(s, "timeout="))
		return AlignedWithTimeout(d), err
	}
	return Mode{}, fmt.Errorf("unknown mode %q", s)
}

// parseInput reads one input line: a word, then key=value fields.
func parseInput(line string) (Input, error) {
	f := strings.Fields(line)
	if len(f) == 0 {
		return nil, fmt.Errorf("empty input")
	}
	args := map[string]int{"records": 1, "bytes": 100}
	for _, kv := range f[1:] {
		k, v, ok := strings.Cut(kv, "=")
		n, err := strconv.Atoi(v)
		if !ok || err != nil {
			return nil, fmt.Errorf("bad field %q", kv)
		}
		args[k] = n
	}
	ch, cp := Channel(args["ch"]), checkpoint.ID(args["cp"])
	switch f[0] {
	case "record":
		return Record[int]{ch, Item[int]{Value: args["v"], Records: args["records"], Bytes: int64(args["bytes"])}}, nil
	case "barrier":
		return Barrier{ch, cp}, nil
	case "end":
		return EndOfChannel{ch}, nil
	case "timer":
		return TimerFired{cp}, nil
	case "cancel":
		return Cancel{cp}, nil
	}
	return nil, fmt.Errorf("unknown input %q", f[0])
}
