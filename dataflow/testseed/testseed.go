// Package testseed gives a randomised test its seed: REWIND_TEST_SEED when
// it is set, to replay a failure, otherwise a fresh one. A failing test logs
// the seed, so every failure names the command that replays it.
package testseed

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
)

// Seed returns the seed of the test t and, if t fails, logs it.
func Seed(t testing.TB) uint64 {
	t.Helper()
	seed := rand.Uint64()
	if s := os.Getenv("REWIND_TEST_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			// Seeds logged as signed numbers replay too.
			i, ierr := strconv.ParseInt(s, 10, 64)
			if ierr != nil {
				t.Fatalf("REWIND_TEST_SEED=%q: not a 64-bit integer", s)
			}
			v = uint64(i)
		}
		seed = v
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("seed %d (replay with REWIND_TEST_SEED=%d)", seed, seed)
		}
	})
	return seed
}
