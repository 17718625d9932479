package diagram

import (
	"encoding/xml"
	"fmt"
	"strings"
	"unicode/utf8"
)

// canvas collects SVG elements and remembers the box of every text it
// placed, so no label is drawn over another: a label that would overlap
// one already placed is left out (its element keeps a tooltip instead).
type canvas struct {
	b     strings.Builder
	boxes []box
}

type box struct{ x0, y0, x1, y1 float64 }

func (a box) overlaps(b box) bool {
	return a.x0 < b.x1 && b.x0 < a.x1 && a.y0 < b.y1 && b.y0 < a.y1
}

// fontSize is the SVG's text size. It draws every text in a monospace
// face, so a label's width is its length times one advance (0.61 em).
const fontSize = 11.0

func textWidth(s string, size float64) float64 {
	return float64(utf8.RuneCountInString(s)) * size * 0.61
}

func esc(s string) string {
	var b strings.Builder
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

func (c *canvas) raw(format string, args ...any) {
	fmt.Fprintf(&c.b, format, args...)
	c.b.WriteByte('\n')
}

// textBox is where a text of size at (x, y) with anchor falls.
func textBox(x, y float64, anchor, s string, size float64) box {
	w := textWidth(s, size)
	x0 := x
	switch anchor {
	case "middle":
		x0 = x - w/2
	case "end":
		x0 = x - w
	}
	// A little air either side, so neighbours never touch.
	return box{x0 - 3, y - size*0.8, x0 + w + 3, y + size*0.25}
}

// fits reports whether a text there would overlap none placed.
func (c *canvas) fits(bx box) bool {
	for _, o := range c.boxes {
		if o.overlaps(bx) {
			return false
		}
	}
	return true
}

// text places a label, or leaves it out if it would overlap another; it
// reports whether it placed it. class picks the style.
func (c *canvas) text(x, y float64, anchor, class, s string) bool {
	size := fontSize
	if class == "small" {
		size = fontSize - 2
	}
	if class == "title" {
		size = fontSize + 3
	}
	bx := textBox(x, y, anchor, s, size)
	if !c.fits(bx) {
		return false
	}
	c.boxes = append(c.boxes, bx)
	c.raw(`<text x="%.1f" y="%.1f" text-anchor="%s" class="%s">%s</text>`, x, y, anchor, class, esc(s))
	return true
}

// rows packs labels into horizontal rows: each label goes to the first row
// where it overlaps nothing.
type rows struct {
	used [][]box
	gap  float64
}

// place returns the row of an interval [x0, x1).
func (r *rows) place(x0, x1 float64) int {
	for i, row := range r.used {
		free := true
		for _, o := range row {
			if x0 < o.x1+r.gap && o.x0 < x1+r.gap {
				free = false
				break
			}
		}
		if free {
			r.used[i] = append(row, box{x0: x0, x1: x1})
			return i
		}
	}
	r.used = append(r.used, []box{{x0: x0, x1: x1}})
	return len(r.used) - 1
}
