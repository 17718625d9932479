package plots

import "image/color"

// series are the Okabe–Ito colours, chosen to stay distinct under the
// common forms of colour blindness; contestant i gets series[i%len].
var series = []color.NRGBA{
	{0x00, 0x72, 0xB2, 0xff}, // blue
	{0xD5, 0x5E, 0x00, 0xff}, // vermillion
	{0x00, 0x9E, 0x73, 0xff}, // bluish green
	{0xCC, 0x79, 0xA7, 0xff}, // reddish purple
	{0xE6, 0x9F, 0x00, 0xff}, // orange
	{0x56, 0xB4, 0xE9, 0xff}, // sky blue
	{0xF0, 0xE4, 0x42, 0xff}, // yellow
	{0x00, 0x00, 0x00, 0xff}, // black
}

func seriesColor(i int) color.NRGBA { return series[i%len(series)] }

// lighter mixes c with white; f=0 is c, f=1 is white.
func lighter(c color.NRGBA, f float64) color.NRGBA {
	mix := func(v uint8) uint8 { return uint8(float64(v) + (255-float64(v))*f) }
	return color.NRGBA{mix(c.R), mix(c.G), mix(c.B), c.A}
}

// translucent is c at alpha a (0–255), for shaded regions behind lines.
func translucent(c color.NRGBA, a uint8) color.NRGBA { return color.NRGBA{c.R, c.G, c.B, a} }

var (
	faultColor  = color.NRGBA{0x00, 0x00, 0x00, 0xff}
	warmupColor = color.NRGBA{0x99, 0x99, 0x99, 0x40}
	noteColor   = color.NRGBA{0x55, 0x55, 0x55, 0xff}
)

// phaseColors shade a crash's phases in time order: detect, acquire,
// restore, catch-up; the last is for a phase cut off by the end of the run.
var phaseColors = []color.NRGBA{
	translucent(series[1], 0x55), // detect: vermillion
	translucent(series[4], 0x55), // acquire: orange
	translucent(series[3], 0x55), // restore: purple
	translucent(series[5], 0x55), // catch-up: sky blue
}
