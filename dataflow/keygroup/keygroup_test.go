package keygroup

import "testing"

func TestRangesPartitionKeyGroups(t *testing.T) {
	for p := 1; p <= Count; p++ {
		seen := make([]int, Count)
		for s := 0; s < p; s++ {
			r := RangeFor(s, p)
			for kg := r.Start; kg < r.End; kg++ {
				seen[kg]++
				if got := Owner(kg, p); got != s {
					t.Fatalf("parallelism %d: key group %d is in range of subtask %d but Owner says %d", p, kg, s, got)
				}
			}
		}
		for kg, n := range seen {
			if n != 1 {
				t.Fatalf("parallelism %d: key group %d owned %d times", p, kg, n)
			}
		}
	}
}

func TestKeyGroupsAreSpread(t *testing.T) {
	counts := make([]int, Count)
	for k := int64(0); k < 128000; k++ {
		counts[Of(k)]++
	}
	for kg, n := range counts {
		if n < 800 || n > 1200 {
			t.Fatalf("key group %d got %d of 128000 sequential keys; want about 1000", kg, n)
		}
	}
}
