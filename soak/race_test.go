//go:build race

package soak

// raceEnabled: the test binary runs under the race detector, and so does
// the rewind binary the quick campaign builds.
const raceEnabled = true
