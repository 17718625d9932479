package diagram

import (
	"time"

	"github.com/rewind-engine/rewind/dataflow/spacetime"
)

// timeScale maps time to x piecewise: the stretches around protocol steps
// (anything but record batches) are drawn wider than quiet ones, so a
// checkpoint's markers, blocking and snapshots, which take a few
// milliseconds of a run of hundreds, can be told apart. The zoomed
// stretches are shaded, so the uneven scale shows.
type timeScale struct {
	end    time.Duration
	bins   []float64 // the width weight of each bin
	cum    []float64 // weight before each bin
	total  float64
	zoom   float64 // how much wider a zoomed bin is
	zoomed []bool
}

const (
	scaleBins = 400
	// zoomShare is the part of the width the zoomed stretches get, at
	// most zoomMax times their share of the time.
	zoomShare = 0.6
	zoomMax   = 12.0
	// crowded is how many steps within three bins make them worth zooming.
	crowded = 4
)

func newTimeScale(m *model) *timeScale {
	s := &timeScale{end: m.end, bins: make([]float64, scaleBins), cum: make([]float64, scaleBins+1), zoomed: make([]bool, scaleBins)}
	// Only where steps crowd: a lone seam or commit reads well at any
	// scale.
	count := make([]int, scaleBins)
	for _, e := range m.events {
		if e.Kind != spacetime.Batch {
			count[s.bin(e.T)]++
		}
	}
	for b := range count {
		near := 0
		for i := max(b-1, 0); i <= min(b+1, scaleBins-1); i++ {
			near += count[i]
		}
		if near >= crowded && count[b] > 0 {
			for i := max(b-1, 0); i <= min(b+1, scaleBins-1); i++ {
				s.zoomed[i] = true
			}
		}
	}
	n := 0
	for _, z := range s.zoomed {
		if z {
			n++
		}
	}
	frac := float64(n) / scaleBins
	s.zoom = 1
	if n > 0 && frac < zoomShare {
		s.zoom = min(zoomShare*(1-frac)/(frac*(1-zoomShare)), zoomMax)
	}
	for i := range s.bins {
		s.bins[i] = 1
		if s.zoomed[i] {
			s.bins[i] = s.zoom
		}
		s.cum[i+1] = s.cum[i] + s.bins[i]
	}
	s.total = s.cum[scaleBins]
	return s
}

func (s *timeScale) bin(t time.Duration) int {
	return min(max(int(float64(t)/float64(s.end)*scaleBins), 0), scaleBins-1)
}

// at is t's place along the width, 0 to 1.
func (s *timeScale) at(t time.Duration) float64 {
	if t <= 0 {
		return 0
	}
	if t >= s.end {
		return 1
	}
	pos := float64(t) / float64(s.end) * scaleBins
	b := s.bin(t)
	return (s.cum[b] + (pos-float64(b))*s.bins[b]) / s.total
}

// zones are the zoomed stretches as [from, to) times.
func (s *timeScale) zones() [][2]time.Duration {
	if s.zoom <= 1 {
		return nil
	}
	var out [][2]time.Duration
	binT := func(i int) time.Duration { return time.Duration(float64(s.end) * float64(i) / scaleBins) }
	for i := 0; i < scaleBins; {
		if !s.zoomed[i] {
			i++
			continue
		}
		j := i
		for j < scaleBins && s.zoomed[j] {
			j++
		}
		out = append(out, [2]time.Duration{binT(i), binT(j)})
		i = j
	}
	return out
}

// zoomedAt reports whether t lies in a zoomed stretch.
func (s *timeScale) zoomedAt(t time.Duration) bool {
	return s.zoom > 1 && t >= 0 && t <= s.end && s.zoomed[s.bin(t)]
}
