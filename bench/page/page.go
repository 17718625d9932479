// Package page writes rewind bench's report.html: one self-contained file
// (styles and every figure's SVG inside it, nothing fetched from the
// network) that opens offline, built from plain values so it does not
// depend on how the harness keeps its results.
package page

import (
	"bytes"
	"fmt"
	"html/template"
	"io"
	"os"
	"strconv"
	"strings"
)

// Report is everything the page shows, in the order it shows it: the
// scenario and machine sections, the result tables, the figures, every
// run's correctness verdict, and how to read it all.
type Report struct {
	Title string
	// Subtitle is a line under the title (the date and the command, say).
	Subtitle string
	Sections []Section
	Tables   []Table
	Figures  []Figure
	Verdicts []Verdict
	// Problems are lines shown under the verdict line, each a thing that
	// makes some figure doubtful (a wrong run, a fault that never fired).
	Problems []string
	// HowToRead are short paragraphs explaining the figures.
	HowToRead []string
}

// Section is a titled list of key/value rows (the scenario, the machine).
type Section struct {
	Title string
	Rows  []Row
}

// Row is one key/value line of a section.
type Row struct{ Key, Value string }

// Table is a result table; every row should have len(Header) cells.
type Table struct {
	Caption string
	Header  []string
	Rows    [][]string
}

// Figure is one plot, inlined from its SVG.
type Figure struct {
	Title, Caption string
	SVG            []byte
}

// Verdict is one run's check against the reference.
type Verdict struct {
	Run    string
	OK     bool
	Detail string
}

// Write renders r as a self-contained HTML page to path.
func Write(path string, r Report) error {
	var buf bytes.Buffer
	if err := Render(&buf, r); err != nil {
		return err
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("page: %w", err)
	}
	return nil
}

// figureView is a figure with its SVG cleaned for inlining.
type figureView struct {
	Title, Caption string
	SVG            template.HTML
	Err            string
}

// Render writes r as HTML to w. Every string is escaped by html/template;
// an SVG is inlined only after it is rebuilt from an allow-list of
// drawing elements (see cleanSVG), and one that fails is replaced by a
// note saying why.
func Render(w io.Writer, r Report) error {
	figs := make([]figureView, len(r.Figures))
	for i, f := range r.Figures {
		figs[i] = figureView{Title: f.Title, Caption: f.Caption}
		svg, err := cleanSVG(f.SVG)
		if err != nil {
			figs[i].Err = err.Error()
			continue
		}
		// Safe: cleanSVG keeps only drawing elements and attributes, with
		// every text and attribute value re-escaped.
		figs[i].SVG = template.HTML(svg)
	}
	failed := 0
	for _, v := range r.Verdicts {
		if !v.OK {
			failed++
		}
	}
	data := struct {
		Report
		Figs   []figureView
		Failed int
	}{r, figs, failed}
	if err := pageTemplate.Execute(w, data); err != nil {
		return fmt.Errorf("page: %w", err)
	}
	return nil
}

// numeric cells are right-aligned so columns of figures line up: a
// number, possibly with a %, a k/M/G/T multiplier, or a bracketed range
// after it ("412 (380–450)"), or the not-measured dash.
func numeric(s string) bool {
	s = strings.TrimSpace(s)
	if s == "—" {
		return true
	}
	if i := strings.Index(s, " ("); i > 0 && strings.HasSuffix(s, ")") {
		s = s[:i]
	}
	s = strings.TrimRight(s, "%kMGT")
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}

var pageTemplate = template.Must(template.New("report").Funcs(template.FuncMap{"numeric": numeric}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222;line-height:1.4}
h1{margin-bottom:.2em}
.sub{color:#555;margin-top:0}
h2{border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}
table{border-collapse:collapse;margin:.5em 0 1.5em;font-size:.92em}
caption{text-align:left;font-weight:600;padding:.3em 0}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left;vertical-align:top}
th{background:#f2f2f2}
td.num{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
table.kv th{width:14em}
.sections{display:flex;flex-wrap:wrap;gap:0 2em}
figure{margin:1.5em 0}
figure svg{width:100%;height:auto;display:block;border:1px solid #eee}
figcaption{color:#444;font-size:.92em;margin-top:.3em}
.ok{color:#006d4f;font-weight:600}
.bad{color:#b23c00;font-weight:600}
.note{color:#b23c00}
</style>
</head>
<body>
<h1>{{.Title}}</h1>
{{with .Subtitle}}<p class="sub">{{.}}</p>{{end}}
{{if .Verdicts}}<p>{{if .Failed}}<span class="bad">{{.Failed}} of {{len .Verdicts}} runs differ from the reference.</span>{{else}}<span class="ok">All {{len .Verdicts}} runs equal the reference.</span>{{end}}</p>{{end}}
{{with .Problems}}<ul class="problems">
{{range .}}<li class="note">{{.}}</li>
{{end}}</ul>{{end}}
{{with .Sections}}<div class="sections">
{{range .}}<div>
<h2>{{.Title}}</h2>
<table class="kv">
{{range .Rows}}<tr><th scope="row">{{.Key}}</th><td>{{.Value}}</td></tr>
{{end}}</table>
</div>
{{end}}</div>{{end}}
{{with .Tables}}<h2>Results</h2>
{{range .}}<table>
{{with .Caption}}<caption>{{.}}</caption>{{end}}
<thead><tr>{{range .Header}}<th scope="col">{{.}}</th>{{end}}</tr></thead>
<tbody>
{{range .Rows}}<tr>{{range .}}<td{{if numeric .}} class="num"{{end}}>{{.}}</td>{{end}}</tr>
{{end}}</tbody>
</table>
{{end}}{{end}}
{{with .Figs}}<h2>Figures</h2>
{{range .}}<figure>
<h3>{{.Title}}</h3>
{{if .Err}}<p class="note">This figure could not be shown: {{.Err}}</p>{{else}}{{.SVG}}{{end}}
{{with .Caption}}<figcaption>{{.}}</figcaption>{{end}}
</figure>
{{end}}{{end}}
{{with .Verdicts}}<h2>Correctness</h2>
<table>
<thead><tr><th scope="col">run</th><th scope="col">verdict</th><th scope="col">detail</th></tr></thead>
<tbody>
{{range .}}<tr><td>{{.Run}}</td><td>{{if .OK}}<span class="ok">equal to the reference</span>{{else}}<span class="bad">differs</span>{{end}}</td><td>{{.Detail}}</td></tr>
{{end}}</tbody>
</table>{{end}}
{{with .HowToRead}}<h2>How to read this</h2>
{{range .}}<p>{{.}}</p>
{{end}}{{end}}
</body>
</html>
`))
