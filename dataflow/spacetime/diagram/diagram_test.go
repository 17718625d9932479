package diagram

import (
	"bytes"
	"encoding/xml"
	"flag"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/rewind-engine/rewind/dataflow/spacetime"
	"github.com/rewind-engine/rewind/dataflow/testseed"
)

var (
	update = flag.Bool("update", false, "rewrite the golden files in testdata/")
	drawTo = flag.String("draw", "", "also write every synthetic render into this directory, to look at")
)

func names(m map[string]Recording) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// checkXML parses doc as XML to its end and returns the root element name.
func checkXML(t *testing.T, what, doc string) string {
	t.Helper()
	dec := xml.NewDecoder(strings.NewReader(doc))
	root := ""
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("%s: not XML: %v", what, err)
		}
		if se, ok := tok.(xml.StartElement); ok && root == "" {
			root = se.Name.Local
		}
	}
	return root
}

func TestSVGParsesAndLabelsEveryLane(t *testing.T) {
	for _, name := range names(synthetic()) {
		rec := synthetic()[name]
		var b bytes.Buffer
		if err := SVG(&b, rec, SVGOptions{Title: name}); err != nil {
			t.Fatal(err)
		}
		if root := checkXML(t, name, b.String()); root != "svg" {
			t.Fatalf("%s: root element %q, want svg", name, root)
		}
		for _, l := range rec.Lanes {
			if !strings.Contains(b.String(), ">"+esc(svgLaneLabel(l))+"</text>") {
				t.Errorf("%s: lane %s has no label", name, l.ID)
			}
		}
		if *drawTo != "" {
			writeFile(t, name+".svg", b.Bytes())
		}
	}
}

func writeFile(t *testing.T, name string, data []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(*drawTo, name), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Every text the SVG places is checked against all placed before; this
// asserts the record of them holds no overlap, and that the labels the
// drawing must show were not the ones left out.
func TestSVGLabelsDoNotOverlap(t *testing.T) {
	check := func(what string, rec Recording) {
		doc := renderSVG(rec, SVGOptions{Title: what})
		for i, a := range doc.c.boxes {
			for _, b := range doc.c.boxes[i+1:] {
				if a.overlaps(b) {
					t.Fatalf("%s: labels overlap: %+v and %+v", what, a, b)
				}
			}
		}
	}
	for _, name := range names(synthetic()) {
		rec := synthetic()[name]
		check(name, rec)
		doc := renderSVG(rec, SVGOptions{}).doc
		for _, want := range bandTexts(rec) {
			if !strings.Contains(doc, ">"+want+"</text>") {
				t.Errorf("%s: band label %q left out", name, want)
			}
		}
	}
	seed := testseed.Seed(t)
	r := rand.New(rand.NewPCG(seed, 0))
	for i := range 50 {
		check("random recording "+strconv.Itoa(i)+" of seed "+strconv.FormatUint(seed, 10), randomRecording(r))
	}
}

func bandTexts(rec Recording) []string {
	d := &drawer{m: newModel(rec)}
	var out []string
	for _, a := range d.annotations() {
		out = append(out, a.text)
	}
	return out
}

func count(s, sub string) int { return strings.Count(s, sub) }

// The drawing shows each recorded step as its glyph: a marker diamond on
// every channel, a cross on each of the dead worker's lanes, a blocked
// box for each blocked channel, in-flight boxes, arrows for all batches.
func TestSVGDrawsEachStep(t *testing.T) {
	tally := func(rec Recording, kind string) int {
		n := 0
		for _, e := range rec.Events {
			if e.Kind == kind {
				n++
			}
		}
		return n
	}
	for _, name := range names(synthetic()) {
		rec := synthetic()[name]
		doc := renderSVG(rec, SVGOptions{}).doc
		if got, want := count(doc, "<title>marker "), tally(rec, spacetime.Marker); got != want {
			t.Errorf("%s: %d marker glyphs, want one per marker event (%d)", name, got, want)
		}
		if got, want := count(doc, "<title>blocked on "), tally(rec, spacetime.BlockStart); got != want {
			t.Errorf("%s: %d blocked boxes, want %d", name, got, want)
		}
		if got, want := count(doc, " in-flight records on "), tally(rec, spacetime.InFlight); got != want {
			t.Errorf("%s: %d in-flight boxes, want %d", name, got, want)
		}
		if got, want := count(doc, `<line class="batch"`), tally(rec, spacetime.Batch); got != want {
			t.Errorf("%s: %d batch arrows, want every batch (%d)", name, got, want)
		}
		if got, want := count(doc, "<title>crash of worker 1"), 0; tally(rec, spacetime.Crash) == 1 {
			for _, l := range rec.Lanes {
				if l.Worker == 1 {
					want++
				}
			}
			if got != want {
				t.Errorf("%s: %d crash crosses, want one on each of worker 1's %d lanes", name, got, want)
			}
		}
		if got, want := count(doc, " seam, offsets logged: "), tally(rec, spacetime.Seam); got != want {
			t.Errorf("%s: %d seams, want %d", name, got, want)
		}
		if strings.HasPrefix(name, "diskphase") && count(doc, `fill="url(#hatch-rerun)"`) != 3 { // 2 units + the legend
			t.Errorf("%s: want the two re-run units drawn as re-runs, got %d hatched boxes", name, count(doc, `fill="url(#hatch-rerun)"`)-1)
		}
	}
}

func TestSVGAggregatesManyBatches(t *testing.T) {
	b := &builder{}
	b.lane("a", "source", 0)
	b.lane("z", "sink", 1)
	for i := range 5000 {
		b.batch(float64(i)/10, "a", "z", 1, false)
	}
	doc := renderSVG(b.rec, SVGOptions{}).doc
	n := count(doc, `<line class="batch"`)
	if n <= 0 || n > 200 {
		t.Fatalf("5000 batches drew %d arrows, want them aggregated into at most 200", n)
	}
	if !strings.Contains(doc, " batches, ") {
		t.Fatalf("aggregated arrows do not say how many batches they carry")
	}
}

var ansi = regexp.MustCompile("\x1b\\[[0-9;]*m")

// No line of the text view is wider than asked, at any width, for any
// recording; colour adds escapes only.
func TestTextFitsItsWidth(t *testing.T) {
	check := func(what string, rec Recording) {
		for _, width := range []int{80, 60} {
			for _, colour := range []bool{false, true} {
				var b bytes.Buffer
				if err := Text(&b, rec, TextOptions{Width: width, Colour: colour}); err != nil {
					t.Fatal(err)
				}
				if !colour && strings.Contains(b.String(), "\x1b") {
					t.Fatalf("%s: escapes without colour", what)
				}
				for _, line := range strings.Split(b.String(), "\n") {
					if n := utf8.RuneCountInString(ansi.ReplaceAllString(line, "")); n > width {
						t.Fatalf("%s: a line of %d columns at width %d:\n%s", what, n, width, line)
					}
				}
			}
		}
	}
	for _, name := range names(synthetic()) {
		check(name, synthetic()[name])
	}
	seed := testseed.Seed(t)
	r := rand.New(rand.NewPCG(seed, 1))
	for range 100 {
		check("a random recording (seed "+strconv.FormatUint(seed, 10)+")", randomRecording(r))
	}
}

func TestTextColourOnlyWhenAsked(t *testing.T) {
	var b bytes.Buffer
	if err := Text(&b, recordwiseJoin(true), TextOptions{Colour: true}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "\x1b[31;1mX\x1b[0m") {
		t.Fatalf("coloured text view has no red crash:\n%s", b.String())
	}
}

func TestTextGolden(t *testing.T) {
	for _, name := range names(synthetic()) {
		var b bytes.Buffer
		if err := Text(&b, synthetic()[name], TextOptions{Width: 80}); err != nil {
			t.Fatal(err)
		}
		if err := Moments(&b, synthetic()[name], 80); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join("testdata", name+".txt")
		if *update {
			if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (go test -update writes it)", err)
		}
		if b.String() != string(want) {
			t.Errorf("%s: text view differs from %s (go test -update rewrites it):\n%s", name, path, b.String())
		}
	}
}

func TestJSONRoundTrips(t *testing.T) {
	recs := synthetic()
	seed := testseed.Seed(t)
	r := rand.New(rand.NewPCG(seed, 2))
	for i := range 20 {
		recs["random "+strconv.Itoa(i)] = randomRecording(r)
	}
	for _, name := range names(recs) {
		var b bytes.Buffer
		if err := WriteJSON(&b, recs[name]); err != nil {
			t.Fatal(err)
		}
		got, err := ReadJSON(&b)
		if err != nil {
			t.Fatal(err)
		}
		want := recs[name]
		if want.Lanes == nil {
			want.Lanes = []spacetime.Lane{}
		}
		if want.Events == nil {
			want.Events = []spacetime.Event{}
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s (seed %d): JSON did not round-trip", name, seed)
		}
	}
	// The time is in microseconds, as its name says.
	var b bytes.Buffer
	rec := Recording{Events: []spacetime.Event{{Kind: spacetime.Crash, T: 1500 * 1000}}}
	if err := WriteJSON(&b, rec); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), `"t_us": 1500,`) {
		t.Fatalf("1.5 ms not written as 1500 µs:\n%s", b.String())
	}
}

func TestHTMLHoldsTheSVGAndLoadsNothing(t *testing.T) {
	rec := recordwiseJoin(false)
	var svg, page bytes.Buffer
	if err := SVG(&svg, rec, SVGOptions{Title: "t"}); err != nil {
		t.Fatal(err)
	}
	if err := HTML(&page, rec, HTMLOptions{SVG: SVGOptions{Title: "t"}, Caption: "A caption & more."}); err != nil {
		t.Fatal(err)
	}
	html := page.String()
	if !strings.Contains(html, svg.String()) {
		t.Fatal("the page does not hold the SVG")
	}
	if !strings.Contains(html, "<figcaption>A caption &amp; more.</figcaption>") {
		t.Fatal("the page has no escaped caption")
	}
	for _, re := range []string{`(?i)src\s*=\s*["']?https?:`, `(?i)href\s*=\s*["']?https?:`, `(?i)url\(\s*["']?https?:`, `(?i)<script`, `(?i)<link`, `(?i)@import`} {
		if regexp.MustCompile(re).MatchString(html) {
			t.Fatalf("the page loads something (%s)", re)
		}
	}
	if *drawTo != "" {
		writeFile(t, "recordwise-unaligned.html", page.Bytes())
	}
}
