package bench

import (
	"fmt"
	"math"
	"strings"
	"unicode/utf8"
)

// notMeasuredCell stands for a figure no run measured, so it is never
// taken for a zero.
const notMeasuredCell = "—"

// compact writes v in at most five characters (six when negative), three
// significant digits, with k/M/G for thousands, millions, billions: what
// a narrow table needs. The files keep the full numbers.
func compact(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Sprint(v)
	}
	a := math.Abs(v)
	var s string
	switch {
	case a == 0:
		return "0"
	case a < 10:
		s = fmt.Sprintf("%.2f", a)
	case a < 100:
		s = fmt.Sprintf("%.1f", a)
	case a < 9999.5:
		s = fmt.Sprintf("%.0f", a)
	default:
		s = scaled(a)
	}
	if v < 0 {
		return "-" + s
	}
	return s
}

// scaled writes a ≥ 9999.5 with a k/M/G/T suffix.
func scaled(a float64) string {
	for _, u := range []struct {
		div    float64
		suffix string
	}{{1e3, "k"}, {1e6, "M"}, {1e9, "G"}, {1e12, "T"}} {
		x := a / u.div
		switch {
		case x < 9.995:
			return fmt.Sprintf("%.2f%s", x, u.suffix)
		case x < 99.95:
			return fmt.Sprintf("%.1f%s", x, u.suffix)
		case x < 999.5:
			return fmt.Sprintf("%.0f%s", x, u.suffix)
		}
	}
	return fmt.Sprintf("%.3g", a)
}

// medianCell is a stat's median, or the not-measured mark.
func medianCell(s Stat) string {
	if !s.Measured() {
		return notMeasuredCell
	}
	return compact(s.Median)
}

// rangeCell is a stat's min–max, empty when the runs agree or only one
// measured it.
func rangeCell(s Stat) string {
	if !s.Measured() || s.N < 2 || compact(s.Min) == compact(s.Max) {
		return ""
	}
	return compact(s.Min) + "–" + compact(s.Max)
}

// statCell is the median with the min–max in brackets, on one line.
func statCell(s Stat) string {
	if r := rangeCell(s); r != "" {
		return medianCell(s) + " (" + r + ")"
	}
	return medianCell(s)
}

// width is a string's width in a terminal: its runes (every text here is
// one column a rune).
func width(s string) int { return utf8.RuneCountInString(s) }

func pad(s string, w int, right bool) string {
	n := w - width(s)
	if n <= 0 {
		return s
	}
	if right {
		return strings.Repeat(" ", n) + s
	}
	return s + strings.Repeat(" ", n)
}

// wrap breaks text at spaces into lines of at most w columns, the lines
// after the first indented; a word longer than a line is cut.
func wrap(text string, w int, indent string) []string {
	if width(text) <= w {
		return []string{text}
	}
	var lines []string
	// The text's own leading spaces (a list's indent) stay on its first line.
	lead := text[:len(text)-len(strings.TrimLeft(text, " "))]
	line := ""
	for i, word := range strings.Fields(text) {
		if i == 0 {
			word = lead + word
		}
		for {
			// A path or a diff with no space in it is cut where the line ends.
			prefix := indent
			if line == "" && len(lines) == 0 {
				prefix = ""
			}
			room := w - width(prefix)
			if width(word) <= room || room <= 0 {
				break
			}
			if line != "" {
				lines, line = append(lines, line), ""
				continue
			}
			r := []rune(word)
			lines = append(lines, prefix+string(r[:room]))
			word = string(r[room:])
		}
		switch {
		case line == "" && len(lines) == 0:
			line = word
		case line == "":
			line = indent + word
		case width(line)+1+width(word) <= w:
			line += " " + word
		default:
			lines = append(lines, line)
			line = indent + word
		}
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}

// seconds writes milliseconds as seconds for a scenario line (5000 → 5s).
func seconds(ms float64) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.3f", ms/1000), "0"), ".") + "s"
}
