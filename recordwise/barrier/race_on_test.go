//go:build race

package barrier

// raceEnabled thins the largest exhaustive scenario: the race detector
// slows this single-goroutine check about fourfold and finds nothing in it.
const raceEnabled = true
