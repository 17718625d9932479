//go:build !race

package microbatch

const raceEnabled = false
