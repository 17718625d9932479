package microbatch

import (
	"fmt"
	"sort"
	"strings"
)

// Listing is what a run's namespace in durable storage holds, parsed from
// its object names. It is the only input of restart planning.
type Listing struct {
	Offsets   []int64 // batch ids with an offsets entry, ascending
	Commits   []int64 // batch ids with a commit entry, ascending
	Manifests []int64 // state versions with a manifest, ascending
	// StateObjects are the key-group state objects, by version.
	StateObjects map[int64][]string
	// Unknown are names under the prefix this executor did not write.
	Unknown []string
}

// ParseListing parses object names relative to a run's prefix.
func ParseListing(names []string) Listing {
	l := Listing{StateObjects: map[int64][]string{}}
	for _, n := range names {
		switch {
		case strings.HasPrefix(n, dirOffsets):
			if id, ok := parseID(n[len(dirOffsets):]); ok && len(n) == len(dirOffsets)+idDigits {
				l.Offsets = append(l.Offsets, id)
				continue
			}
		case strings.HasPrefix(n, dirCommits):
			if id, ok := parseID(n[len(dirCommits):]); ok && len(n) == len(dirCommits)+idDigits {
				l.Commits = append(l.Commits, id)
				continue
			}
		case strings.HasPrefix(n, dirState):
			rest := n[len(dirState):]
			if v, ok := parseID(rest); ok {
				switch tail := rest[idDigits:]; {
				case tail == "-manifest":
					l.Manifests = append(l.Manifests, v)
					continue
				case strings.HasPrefix(tail, "-op-"):
					l.StateObjects[v] = append(l.StateObjects[v], n)
					continue
				}
			}
		}
		l.Unknown = append(l.Unknown, n)
	}
	for _, s := range [][]int64{l.Offsets, l.Commits, l.Manifests} {
		sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	}
	return l
}

// RestartPlan says where a restarted coordinator resumes.
type RestartPlan struct {
	// LastCommitted is the newest batch with a commit entry, -1 if none.
	// Its commit entry names the state version to restore and its offsets
	// entry the positions to reopen the sources at.
	LastCommitted int64
	// Rerun is the batch whose offsets are logged but which has no commit
	// entry: it runs again with exactly the logged positions, on top of the
	// state after LastCommitted. -1 if there is none.
	Rerun int64
	// Next is the id of the first batch planned afresh.
	Next int64
}

// PlanRestart decides, from the listing alone, where to resume. The
// protocol writes offsets/N only after commits/N-1, or beside it when N is
// planned ahead, so at most one batch can be logged and uncommitted with
// work begun on it, followed at most by one planned ahead; anything else
// means the log was damaged or written by something else, and resuming
// from it could apply positions to the wrong state, so it is an error.
func PlanRestart(l Listing) (RestartPlan, error) {
	p := RestartPlan{LastCommitted: -1, Rerun: -1}
	if n := len(l.Commits); n > 0 {
		p.LastCommitted = l.Commits[n-1]
	}
	newestOffsets := int64(-1)
	if n := len(l.Offsets); n > 0 {
		newestOffsets = l.Offsets[n-1]
	}
	if p.LastCommitted >= 0 && !contains(l.Offsets, p.LastCommitted) {
		return p, fmt.Errorf("commits/%d exists without offsets/%d: the log is damaged, cannot resume", p.LastCommitted, p.LastCommitted)
	}
	switch {
	case newestOffsets == p.LastCommitted+2 && contains(l.Offsets, p.LastCommitted+1):
		// offsets/C+2 was written ahead, beside commits/C+1, which did not
		// land. Batch C+2 runs only after both are durable, so no work on
		// it began: C+1 runs again and C+2 is planned anew (its entry is
		// overwritten then).
		p.Rerun = p.LastCommitted + 1
		p.Next = p.LastCommitted + 2
	case newestOffsets > p.LastCommitted+1:
		return p, fmt.Errorf("offsets/%d is logged but the newest commit is %d: the protocol logs a batch at the earliest beside the commit entry of the one before it; the log is damaged, cannot resume", newestOffsets, p.LastCommitted)
	case newestOffsets == p.LastCommitted+1:
		p.Rerun = newestOffsets
		p.Next = newestOffsets + 1
	default:
		p.Next = p.LastCommitted + 1
	}
	return p, nil
}

func contains(s []int64, v int64) bool {
	i := sort.Search(len(s), func(i int) bool { return s[i] >= v })
	return i < len(s) && s[i] == v
}

// RetentionInput is what retention needs besides the listing: the newest
// committed batch, how many batches to keep, and the state the oldest kept
// commit needs.
type RetentionInput struct {
	LastCommitted int64
	Keep          int
	// OldestLiveManifest is the state version named by the oldest kept
	// commit entry (-1: it has no state). Manifests older than it are no
	// longer needed by any kept commit.
	OldestLiveManifest int64
	// MinLiveObject is the oldest version of any state object that manifest
	// refers to (deltas refer back to the last full snapshot). Older objects
	// are referenced by no kept manifest.
	MinLiveObject int64
}

// RetentionDeletes returns the objects to delete so that only the newest
// Keep offsets and commit entries remain, and only state that a kept commit
// can still need. Nothing at or above the last committed batch is deleted:
// an uncommitted batch's offsets and state must survive for its re-run.
// Versions of state are kept whole down to the last full snapshot a kept
// manifest builds on.
func RetentionDeletes(l Listing, in RetentionInput) []string {
	if in.LastCommitted < 0 || in.Keep < 1 {
		return nil
	}
	oldestKept := in.LastCommitted - int64(in.Keep) + 1
	var out []string
	for _, id := range l.Offsets {
		if id < oldestKept {
			out = append(out, offsetsName(id))
		}
	}
	for _, id := range l.Commits {
		if id < oldestKept {
			out = append(out, commitName(id))
		}
	}
	manifestFloor, objectFloor := in.OldestLiveManifest, in.MinLiveObject
	if in.OldestLiveManifest < 0 {
		// No kept commit needs state older than itself.
		manifestFloor, objectFloor = oldestKept, oldestKept
	}
	manifestFloor = min(manifestFloor, in.LastCommitted)
	objectFloor = min(objectFloor, manifestFloor)
	for _, v := range l.Manifests {
		if v < manifestFloor {
			out = append(out, manifestName(v))
		}
	}
	vs := make([]int64, 0, len(l.StateObjects))
	for v := range l.StateObjects {
		vs = append(vs, v)
	}
	sort.Slice(vs, func(i, j int) bool { return vs[i] < vs[j] })
	for _, v := range vs {
		if v < objectFloor {
			out = append(out, l.StateObjects[v]...)
		}
	}
	return out
}
