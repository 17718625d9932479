// Package keygroup splits the key space into a fixed number of key groups.
//
// Keyed state is stored and snapshotted per key group, never per subtask, so
// that a recovery point written at one parallelism can be restored at another:
// a subtask owns a contiguous range of key groups, and re-scaling only moves
// whole groups between subtasks (the scheme Flink uses).
package keygroup

// Count is the fixed number of key groups. It bounds the useful parallelism
// of keyed stages and must never change for existing recovery points.
const Count = 128

// Hash mixes a key into 64 well-distributed bits (the splitmix64 finaliser).
// Operators reuse it for their hash tables so the key is hashed once.
func Hash(key int64) uint64 {
	z := uint64(key) + 0x9e3779b97f4a7c15
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// OfHash returns the key group of a key whose Hash is h. It uses the top 7
// bits, leaving the low bits free for hash-table slot selection.
func OfHash(h uint64) int { return int(h >> 57) }

// Of returns the key group of key.
func Of(key int64) int { return OfHash(Hash(key)) }

// Owner returns the subtask (0..parallelism-1) that owns key group kg.
func Owner(kg, parallelism int) int { return kg * parallelism / Count }

// Range is the half-open range [Start, End) of key groups owned by a subtask.
type Range struct{ Start, End int }

// RangeFor returns the key groups owned by subtask of parallelism.
func RangeFor(subtask, parallelism int) Range {
	return Range{
		Start: (subtask*Count + parallelism - 1) / parallelism,
		End:   ((subtask+1)*Count + parallelism - 1) / parallelism,
	}
}

// Contains reports whether kg is in r.
func (r Range) Contains(kg int) bool { return kg >= r.Start && kg < r.End }

// All is the range of every key group, owned by a parallelism-1 stage.
var All = Range{0, Count}
