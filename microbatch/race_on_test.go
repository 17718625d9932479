//go:build race

package microbatch

// raceEnabled: the race detector multiplies the cost of every run, so the
// crash suites use smaller inputs (the same number of schedules and points).
const raceEnabled = true
