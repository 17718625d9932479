package microbatch

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/rewind-engine/rewind/dataflow/eventtime"
	"github.com/rewind-engine/rewind/dataflow/inspect"
	"github.com/rewind-engine/rewind/dataflow/keygroup"
)

// Durable layout. Every object of one run lives under
//
//	microbatch/<job>/<run id>/
//
// so several runs (and other executors) can share one store. Below it:
//
//	offsets/<N>                 the write-ahead entry of batch N (JSON)
//	commits/<N>                 the commit entry of batch N (JSON)
//	state/<N>-manifest          state version N: the objects each (stage,
//	                            key group) is rebuilt from (JSON)
//	state/<N>-op-<stage>        key-group states of one stage (all its
//	                            subtasks) that changed in version N, whole
//	                            or as edits (package state delta object)
//	state/<N>-op-<stage>-p<k>   piece k of a full version N of a large
//	                            state, every key group in one piece
//	                            (fullpieces.go)
//
// <N> is the batch id as 20 zero-padded digits, so names sort by batch.

// formatVersion is written into every JSON entry; readers reject others.
const formatVersion = 1

const (
	dirOffsets = "offsets/"
	dirCommits = "commits/"
	dirState   = "state/"
	idDigits   = 20
)

// runPrefix is the namespace of one run.
func runPrefix(jobName, runID string) string {
	return inspect.RunPrefix("microbatch", jobName, runID)
}

func batchName(n int64) string { return fmt.Sprintf("%0*d", idDigits, n) }

func offsetsName(n int64) string  { return dirOffsets + batchName(n) }
func commitName(n int64) string   { return dirCommits + batchName(n) }
func manifestName(v int64) string { return dirState + batchName(v) + "-manifest" }

// stateObjectName is the object of one stateful stage in version v: the
// key groups of every subtask that changed. (Runs written before one
// object per stage kept one per subtask, "...-op-<stage>-s<i>"; their
// manifests name them, so they still restore.)
func stateObjectName(v int64, stage string) string {
	return dirState + batchName(v) + "-op-" + stage
}

// parseID parses a zero-padded batch id at the start of s. Only digits
// are taken ("+000…1" is not batch 1), so a name maps to one id and back.
func parseID(s string) (int64, bool) {
	if len(s) < idDigits {
		return 0, false
	}
	for i := range idDigits {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseInt(s[:idDigits], 10, 64)
	if err != nil || n < 0 {
		return 0, false
	}
	return n, true
}

// validStageID reports whether a stage id can be part of an object name.
func validStageID(id string) bool {
	if id == "" {
		return false
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return false
		}
	}
	return true
}

// partRange is the range one partition contributes to a batch.
type partRange struct {
	Input     string `json:"input"`
	Partition string `json:"partition"`
	Start     int64  `json:"start"`
	End       int64  `json:"end"`
}

// offsetsEntry is offsets/N: everything needed to run batch N again with
// exactly the same input and the same watermarks.
type offsetsEntry struct {
	Format int    `json:"format"`
	Batch  int64  `json:"batch"`
	Job    string `json:"job"`
	// Ranges has one entry per partition of every input, in job order.
	Ranges []partRange `json:"ranges"`
	// WatermarkBefore was delivered at the end of batch N-1; it is
	// delivered again to operators restored from state version N-1.
	WatermarkBefore int64 `json:"watermark_before"`
	// Watermark is delivered at the end of batch N, and Tracker is the
	// watermark tracker after batch N's input.
	Watermark int64           `json:"watermark"`
	Tracker   eventtime.State `json:"tracker"`
	// PlannedUnixNano is when the batch was planned (for progress only).
	PlannedUnixNano int64 `json:"planned_unix_nano"`
	// Parallelism is the number of sink subtasks the batch was planned for
	// (0 in entries written before it was recorded). A fallback re-runs
	// published epochs only at a parallelism at least this (fallback.go).
	Parallelism int `json:"parallelism,omitempty"`
}

func (e *offsetsEntry) rows() int64 {
	var n int64
	for _, r := range e.Ranges {
		n += r.End - r.Start
	}
	return n
}

// commitEntry is commits/N.
type commitEntry struct {
	Format int   `json:"format"`
	Batch  int64 `json:"batch"`
	// StateVersion is the manifest that holds the state after batch N: N
	// when batch N changed state, an older version when it did not, -1 when
	// there is no state at all.
	StateVersion      int64 `json:"state_version"`
	InputRows         int64 `json:"input_rows"`
	CommittedUnixNano int64 `json:"committed_unix_nano"`
}

// stateRef names one state object and the key groups to take from it.
type stateRef struct {
	Object    string `json:"object"`
	KeyGroups []int  `json:"key_groups"`
}

// manifestEntry is state/<V>-manifest: for every stateful stage, the
// objects each non-empty key group is rebuilt from. A key group is listed
// in every object of its chain: the one holding it whole, then those
// holding an edit of it; the chain's order is the objects' version order.
// Key groups missing are empty. DeltaBytes is what the deltas written
// since the last full snapshot add up to, so that a restarted run knows
// when the next full snapshot is due.
type manifestEntry struct {
	Format     int                   `json:"format"`
	Version    int64                 `json:"version"`
	Full       bool                  `json:"full"`
	DeltaBytes int64                 `json:"delta_bytes"`
	Stages     map[string][]stateRef `json:"stages"`
}

// manifestFormat is the format of manifests, which gained chains in 2.
const manifestFormat = 2

// stateIndex is the in-memory form of a manifest: the chain of objects of
// each key group of each stateful stage, oldest first (nil = empty group).
type stateIndex map[string]*[keygroup.Count][]string

func (x stateIndex) clone() stateIndex {
	out := make(stateIndex, len(x))
	for s, a := range x {
		c := &[keygroup.Count][]string{}
		for kg, chain := range a {
			c[kg] = slices.Clone(chain)
		}
		out[s] = c
	}
	return out
}

// objects returns every object the index refers to.
func (x stateIndex) objects() map[string]bool {
	out := map[string]bool{}
	for _, a := range x {
		for _, chain := range a {
			for _, o := range chain {
				out[o] = true
			}
		}
	}
	return out
}

func (x stateIndex) toManifest(v int64, full bool, deltaBytes int64) manifestEntry {
	m := manifestEntry{Format: manifestFormat, Version: v, Full: full, DeltaBytes: deltaBytes, Stages: map[string][]stateRef{}}
	for stage, a := range x {
		byObj := map[string][]int{}
		for kg, chain := range a {
			for _, o := range chain {
				byObj[o] = append(byObj[o], kg)
			}
		}
		refs := make([]stateRef, 0, len(byObj))
		for o, kgs := range byObj {
			refs = append(refs, stateRef{Object: o, KeyGroups: kgs})
		}
		sort.Slice(refs, func(i, j int) bool { return refs[i].Object < refs[j].Object })
		m.Stages[stage] = refs
	}
	return m
}

func (m *manifestEntry) index(prefixCheck func(string) error) (stateIndex, error) {
	x := stateIndex{}
	for stage, refs := range m.Stages {
		a := &[keygroup.Count][]string{}
		seen := map[string]bool{}
		for _, r := range refs {
			if err := prefixCheck(r.Object); err != nil {
				return nil, err
			}
			if seen[r.Object] {
				return nil, fmt.Errorf("manifest %d: stage %s: object %s listed twice", m.Version, stage, r.Object)
			}
			seen[r.Object] = true
			for _, kg := range r.KeyGroups {
				if kg < 0 || kg >= keygroup.Count || slices.Contains(a[kg], r.Object) {
					return nil, fmt.Errorf("manifest %d: stage %s: key group %d out of range or listed twice", m.Version, stage, kg)
				}
				a[kg] = append(a[kg], r.Object)
			}
		}
		for kg, chain := range a {
			// Names sort by version; one version holds a key group once.
			slices.Sort(chain)
			for i := 1; i < len(chain); i++ {
				v0, _ := parseID(chain[i-1][len(dirState):])
				v1, _ := parseID(chain[i][len(dirState):])
				if v0 == v1 {
					return nil, fmt.Errorf("manifest %d: stage %s: key group %d is in two objects of version %d", m.Version, stage, kg, v0)
				}
			}
			if len(chain) == 0 {
				continue
			}
			if n, _ := parseID(chain[len(chain)-1][len(dirState):]); n > m.Version {
				return nil, fmt.Errorf("manifest %d: stage %s: key group %d is in %s, newer than the manifest", m.Version, stage, kg, chain[len(chain)-1])
			}
		}
		x[stage] = a
	}
	return x, nil
}

func checkStateObjectName(name string) error {
	if !strings.HasPrefix(name, dirState) {
		return fmt.Errorf("manifest refers to %q, which is not a state object", name)
	}
	if _, ok := parseID(name[len(dirState):]); !ok {
		return fmt.Errorf("manifest refers to %q, which has no version", name)
	}
	return nil
}

func encodeEntry(v any) ([]byte, error) { return json.Marshal(v) }

func decodeOffsets(data []byte) (*offsetsEntry, error) {
	var e offsetsEntry
	if err := json.Unmarshal(data, &e); err != nil {
		return nil, fmt.Errorf("decoding offsets entry: %w", err)
	}
	if e.Format != formatVersion {
		return nil, fmt.Errorf("offsets entry has format %d, this build reads %d", e.Format, formatVersion)
	}
	return &e, nil
}

func decodeCommit(data []byte) (*commitEntry, error) {
	var e commitEntry
	if err := json.Unmarshal(data, &e); err != nil {
		return nil, fmt.Errorf("decoding commit entry: %w", err)
	}
	if e.Format != formatVersion {
		return nil, fmt.Errorf("commit entry has format %d, this build reads %d", e.Format, formatVersion)
	}
	return &e, nil
}

func decodeManifest(data []byte) (*manifestEntry, error) {
	var e manifestEntry
	if err := json.Unmarshal(data, &e); err != nil {
		return nil, fmt.Errorf("decoding state manifest: %w", err)
	}
	if e.Format != manifestFormat {
		return nil, fmt.Errorf("state manifest has format %d, this build reads %d", e.Format, manifestFormat)
	}
	return &e, nil
}
