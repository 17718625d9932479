package page

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
)

// svgElements are the drawing elements a figure may use; anything else
// (script, foreignObject, image, use, style …) makes the SVG rejected, so
// nothing in an inlined figure can run code or fetch a resource.
var svgElements = map[string]bool{
	"svg": true, "g": true, "path": true, "text": true, "tspan": true,
	"rect": true, "line": true, "polyline": true, "polygon": true,
	"circle": true, "ellipse": true, "title": true, "desc": true,
	"defs": true, "clipPath": true,
}

// cleanSVG rebuilds an SVG document for inlining in HTML: the prolog,
// comments and namespace declarations dropped (the HTML parser puts <svg>
// in the SVG namespace itself), only allowed elements kept, no event
// handler or link attribute, no url() other than a local #fragment, and
// every text and attribute value escaped anew.
func cleanSVG(src []byte) (string, error) {
	if len(bytes.TrimSpace(src)) == 0 {
		return "", errors.New("the SVG is empty")
	}
	dec := xml.NewDecoder(bytes.NewReader(src))
	var out strings.Builder
	depth, roots := 0, 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("the SVG is not well-formed XML: %v", err)
		}
		switch t := tok.(type) {
		case xml.StartElement:
			name := t.Name.Local
			if !svgElements[name] {
				return "", fmt.Errorf("the SVG has a <%s> element, which is not inlined", name)
			}
			if depth == 0 {
				if name != "svg" {
					return "", fmt.Errorf("the document's root is <%s>, not <svg>", name)
				}
				roots++
			}
			depth++
			out.WriteString("<" + name)
			for _, a := range t.Attr {
				if a.Name.Space == "xmlns" || a.Name.Local == "xmlns" {
					continue
				}
				if err := checkAttr(a); err != nil {
					return "", err
				}
				out.WriteString(" " + a.Name.Local + `="`)
				xml.EscapeText(&out, []byte(a.Value)) //nolint:errcheck // a strings.Builder does not fail
				out.WriteString(`"`)
			}
			out.WriteString(">")
		case xml.EndElement:
			depth--
			out.WriteString("</" + t.Name.Local + ">")
		case xml.CharData:
			if depth > 0 {
				xml.EscapeText(&out, t) //nolint:errcheck // a strings.Builder does not fail
			}
		}
	}
	if roots != 1 {
		return "", fmt.Errorf("the SVG has %d root elements, want one <svg>", roots)
	}
	return out.String(), nil
}

func checkAttr(a xml.Attr) error {
	name := strings.ToLower(a.Name.Local)
	val := strings.ToLower(a.Value)
	switch {
	case strings.HasPrefix(name, "on"):
		return fmt.Errorf("the SVG has an event handler attribute %q", a.Name.Local)
	case name == "href" || name == "src":
		return fmt.Errorf("the SVG links to %q", a.Value)
	case strings.Contains(val, "javascript:"):
		return fmt.Errorf("the SVG has a script URL in %q", a.Name.Local)
	}
	for rest := val; ; {
		i := strings.Index(rest, "url(")
		if i < 0 {
			return nil
		}
		rest = strings.TrimLeft(rest[i+len("url("):], ` '"`)
		if !strings.HasPrefix(rest, "#") {
			return fmt.Errorf("the SVG refers to an outside resource in %q", a.Name.Local)
		}
	}
}
