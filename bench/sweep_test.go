package bench

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParseSweep(t *testing.T) {
	for _, tc := range []struct {
		in   string
		name string
		pts  []SweepPoint
	}{
		{"checkpoint-interval=100ms,500ms,1s,5s", SweepCadence, []SweepPoint{
			{Label: "100ms", Cadence: 100 * time.Millisecond}, {Label: "500ms", Cadence: 500 * time.Millisecond},
			{Label: "1s", Cadence: time.Second}, {Label: "5s", Cadence: 5 * time.Second}}},
		{"load=50%,80%,95%", SweepLoad, []SweepPoint{{Label: "50%", Load: 0.5}, {Label: "80%", Load: 0.8}, {Label: "95%", Load: 0.95}}},
		{" load = 12.5% , 99%", SweepLoad, []SweepPoint{{Label: "12.5%", Load: 0.125}, {Label: "99%", Load: 0.99}}},
		{"parallelism=2,4,8", SweepParallelism, []SweepPoint{{Label: "2", Parallelism: 2}, {Label: "4", Parallelism: 4}, {Label: "8", Parallelism: 8}}},
		{"parallelism=1", SweepParallelism, []SweepPoint{{Label: "1", Parallelism: 1}}},
	} {
		name, pts, err := ParseSweep(tc.in)
		if err != nil {
			t.Errorf("ParseSweep(%q): %v", tc.in, err)
			continue
		}
		if name != tc.name || !reflect.DeepEqual(pts, tc.pts) {
			t.Errorf("ParseSweep(%q) = %q %+v, want %q %+v", tc.in, name, pts, tc.name, tc.pts)
		}
	}
}

func TestParseSweepErrors(t *testing.T) {
	for in, want := range map[string]string{
		"":                              "write NAME=V1,V2",
		"load":                          "write NAME=V1,V2",
		"=1s":                           "write NAME=V1,V2",
		"trigger=1s":                    `unknown setting "trigger" (allowed: checkpoint-interval, load, parallelism)`,
		"checkpoint-interval=":          "an empty value",
		"checkpoint-interval=1s,,2s":    "an empty value",
		"checkpoint-interval=fast":      `"fast" is not a duration`,
		"checkpoint-interval=0s":        "at least 1ms",
		"checkpoint-interval=-1s":       "at least 1ms",
		"checkpoint-interval=2h":        "at most 1h",
		"checkpoint-interval=1s,1000ms": "1s and 1000ms are the same value",
		"load=0.5":                      "write a percentage of capacity",
		"load=abc%":                     "not a number followed by %",
		"load=0%":                       "above 0% and below 100%",
		"load=100%":                     "above 0% and below 100%",
		"load=NaN%":                     "above 0% and below 100%",
		"load=50%,50.0%":                "50% and 50.0% are the same value",
		"parallelism=two":               "not a whole number",
		"parallelism=0":                 "allowed is 1..128",
		"parallelism=129":               "allowed is 1..128",
		"parallelism=" + strings.Repeat("1,", 16) + "1": "17 values, at most 16",
	} {
		_, _, err := ParseSweep(in)
		if err == nil {
			t.Errorf("ParseSweep(%q) succeeded, want an error containing %q", in, want)
			continue
		}
		msg := err.Error()
		if !strings.HasPrefix(msg, "invalid --sweep ") || !strings.Contains(msg, want) || strings.Contains(msg, "\n") {
			t.Errorf("ParseSweep(%q) error %q: want one line starting \"invalid --sweep\" containing %q", in, msg, want)
		}
	}
}

// FuzzParseSweep: a value either fails with a one-line usage error or
// gives points of the named setting only, each labelled as written,
// within bounds and distinct.
func FuzzParseSweep(f *testing.F) {
	for _, seed := range []string{"checkpoint-interval=100ms,500ms,1s,5s", "load=50%,80%,95%", "parallelism=2,4,8",
		"load=1e2%", "load=-0%", "checkpoint-interval=1h0m0.001s", "parallelism=+3", "x=", "load=50%%"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		name, pts, err := ParseSweep(s)
		if err != nil {
			if msg := err.Error(); !strings.HasPrefix(msg, "invalid --sweep ") || strings.Contains(msg, "\n") {
				t.Fatalf("ParseSweep(%q) error %q is not one usage line", s, msg)
			}
			return
		}
		if !slices.Contains(sweepNames, name) || len(pts) == 0 || len(pts) > maxSweepPoints {
			t.Fatalf("ParseSweep(%q) = %q with %d points", s, name, len(pts))
		}
		seen := map[SweepPoint]bool{}
		for _, pt := range pts {
			if pt.Label == "" || !strings.Contains(s, pt.Label) {
				t.Fatalf("ParseSweep(%q): label %q is not as written", s, pt.Label)
			}
			set := 0
			for _, on := range []bool{pt.Cadence != 0, pt.Load != 0, pt.Parallelism != 0} {
				if on {
					set++
				}
			}
			ok := set == 1 && map[string]bool{
				SweepCadence:     pt.Cadence >= time.Millisecond && pt.Cadence <= time.Hour,
				SweepLoad:        pt.Load > 0 && pt.Load < 1,
				SweepParallelism: pt.Parallelism >= 1 && pt.Parallelism <= 128,
			}[name]
			if !ok {
				t.Fatalf("ParseSweep(%q): point %+v out of bounds for %s", s, pt, name)
			}
			pt.Label = ""
			if seen[pt] {
				t.Fatalf("ParseSweep(%q): value %+v twice", s, pt)
			}
			seen[pt] = true
		}
	})
}
