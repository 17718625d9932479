package operator

import "errors"

// ErrSumOverflow is what an aggregation's error wraps when a sum would
// leave the int64 range. Sums are int64 in the output schema and in every
// executor's state; rather than wrap around silently (3·2^62 would read as
// -2^62) or widen the schema, the run fails with the key named.
var ErrSumOverflow = errors.New("int64 sum overflow")

// AddInt64 returns a+b and whether it is exact (did not overflow).
func AddInt64(a, b int64) (int64, bool) {
	s := a + b
	return s, (a^s)&(b^s) >= 0
}
