package testseed

import "testing"

func TestSeedFromTheEnvironment(t *testing.T) {
	for in, want := range map[string]uint64{"42": 42, "18446744073709551615": 1<<64 - 1, "-1": 1<<64 - 1} {
		t.Setenv("REWIND_TEST_SEED", in)
		if got := Seed(t); got != want {
			t.Errorf("REWIND_TEST_SEED=%s: seed %d, want %d", in, got, want)
		}
	}
}

func TestFreshSeedsDiffer(t *testing.T) {
	t.Setenv("REWIND_TEST_SEED", "")
	if a, b := Seed(t), Seed(t); a == b {
		t.Errorf("two fresh seeds are both %d", a)
	}
}
