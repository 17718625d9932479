//go:build !race

package barrier

const raceEnabled = false
