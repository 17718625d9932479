package bench

import (
	"strings"
	"testing"
)

func TestCompact(t *testing.T) {
	for _, c := range []struct {
		in   float64
		want string
	}{
		{0, "0"}, {0.004, "0.00"}, {4.126, "4.13"}, {41.26, "41.3"}, {412.6, "413"}, {9999.4, "9999"},
		{9999.6, "10.0k"}, {12345, "12.3k"}, {250000, "250k"}, {999_600, "1.00M"}, {12_582_912, "12.6M"},
		{3e9, "3.00G"}, {-186, "-186"},
	} {
		if got := compact(c.in); got != c.want {
			t.Errorf("compact(%v) = %q, want %q", c.in, got, c.want)
		}
		if n := len(strings.TrimPrefix(compact(c.in), "-")); n > 5 {
			t.Errorf("compact(%v) = %q is %d characters, want at most 5", c.in, compact(c.in), n)
		}
	}
}

func TestWrap(t *testing.T) {
	text := "  - diskphase #2: differs from the reference: " + strings.Repeat("x", 50) + " and then some words to wrap"
	lines := wrap(text, 30, "    ")
	if !strings.HasPrefix(lines[0], "  - diskphase") {
		t.Errorf("first line %q lost its indent", lines[0])
	}
	var words []string
	for i, l := range lines {
		if width(l) > 30 {
			t.Errorf("line %d %q is wider than 30", i, l)
		}
		if i > 0 && !strings.HasPrefix(l, "    ") {
			t.Errorf("line %d %q is not indented", i, l)
		}
		words = append(words, strings.Fields(l)...)
	}
	if got, want := strings.Join(words, ""), strings.Join(strings.Fields(text), ""); got != want {
		t.Errorf("wrapping lost text: %q, want %q", got, want)
	}
}
