package diagram

import (
	"fmt"
	"io"
	"strings"
)

// HTMLOptions shape the page.
type HTMLOptions struct {
	SVG SVGOptions
	// Caption says in a sentence or two what the drawing shows.
	Caption string
}

// HTML writes a self-contained page: the SVG inline under a short caption,
// with nothing loaded from anywhere else.
func HTML(w io.Writer, rec Recording, o HTMLOptions) error {
	var svg strings.Builder
	if err := SVG(&svg, rec, o.SVG); err != nil {
		return err
	}
	title := o.SVG.Title
	if title == "" {
		title = "rewind trace"
	}
	_, err := fmt.Fprintf(w, `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>%s</title>
<style>
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #222; }
figure { margin: 0; overflow-x: auto; }
figcaption { max-width: 60em; margin-bottom: 0.8em; line-height: 1.4; }
</style>
</head>
<body>
<figure>
<figcaption>%s</figcaption>
%s</figure>
</body>
</html>
`, esc(title), esc(o.Caption), svg.String())
	return err
}
