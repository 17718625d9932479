package recordwise

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/rewind-engine/rewind/dataflow/inspect"
	"github.com/rewind-engine/rewind/recordwise/checkpoint"
)

// Durable layout. Every object of one run lives under
//
//	recordwise/<job>/<run id>/
//
// so several runs (and other executors) can share one store. Below it, one
// directory per checkpoint:
//
//	chk-<id>/<task>/op-<stage>   key-group states of one stateful operator
//	                             of the task (package state blob)
//	chk-<id>/<task>/channels     in-flight records persisted with the part
//	                             (input and output channel state), only when
//	                             there were any
//	chk-<id>/<task>/part         the part descriptor (JSON): source
//	                             positions, watermarks, the objects above
//	                             with their sizes; written last by the task
//	chk-<id>/_metadata           the checkpoint metadata (JSON): every
//	                             task's part; written by the coordinator
//	                             only once every part is durable
//
// <id> is the checkpoint id as 20 zero-padded digits, so names sort by id.
// <task> is "<head stage>-<subtask>", e.g. "count-1". A chk-<id> directory
// without _metadata is not a recovery point, whatever else it holds.

// layoutVersion is written into every JSON object; readers reject others.
const layoutVersion = 1

const (
	chkDirPrefix = "chk-"
	metadataName = "_metadata"
	partName     = "part"
	channelsName = "channels"
	idDigits     = 20
)

// runPrefix is the namespace of one run.
func runPrefix(jobName, runID string) string {
	return inspect.RunPrefix("recordwise", jobName, runID)
}

// chkDir is the directory of checkpoint id, relative to the run prefix,
// with a trailing slash.
func chkDir(id checkpoint.ID) string {
	return fmt.Sprintf("%s%0*d/", chkDirPrefix, idDigits, uint64(id))
}

func metadataKey(id checkpoint.ID) string { return chkDir(id) + metadataName }

func partKey(id checkpoint.ID, task checkpoint.TaskID) string {
	return chkDir(id) + string(task) + "/" + partName
}

func opStateKey(id checkpoint.ID, task checkpoint.TaskID, stage string) string {
	return chkDir(id) + string(task) + "/op-" + stage
}

func channelsKey(id checkpoint.ID, task checkpoint.TaskID) string {
	return chkDir(id) + string(task) + "/" + channelsName
}

// parseChkName splits a name relative to the run prefix into the
// checkpoint id and the rest ("_metadata", "count-0/part", ...).
func parseChkName(rel string) (checkpoint.ID, string, bool) {
	if !strings.HasPrefix(rel, chkDirPrefix) {
		return 0, "", false
	}
	rest := rel[len(chkDirPrefix):]
	dir, tail, ok := strings.Cut(rest, "/")
	if !ok || len(dir) != idDigits {
		return 0, "", false
	}
	n, err := strconv.ParseUint(dir, 10, 64)
	if err != nil || n == 0 {
		return 0, "", false
	}
	return checkpoint.ID(n), tail, true
}

// validName reports whether s is usable as a run id or stage name inside
// object names: letters, digits, '_', '-' and '.' (not leading).
func validName(s string) bool {
	if s == "" || s[0] == '.' {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_', r == '-', r == '.':
		default:
			return false
		}
	}
	return true
}

// metadata is the content of chk-<id>/_metadata.
type metadata struct {
	Version     int        `json:"version"`
	Job         string     `json:"job"`
	RunID       string     `json:"run_id"`
	Checkpoint  uint64     `json:"checkpoint"`
	Parallelism int        `json:"parallelism"`
	Barriers    string     `json:"barriers"`
	TriggeredAt string     `json:"triggered_at"`
	Parts       []metaPart `json:"parts"`
	// Replayed are the sink epochs whose visible rows a run restored from
	// this point may produce again: set only by an incarnation that fell
	// back past a committed point, and carried by every point it and its
	// successors take (see replayGuard).
	Replayed []epochSpan `json:"replayed_epochs,omitempty"`
}

// epochSpan is the sink epochs e with After < e <= Through.
type epochSpan struct {
	After   int64 `json:"after"`
	Through int64 `json:"through"`
}

type metaPart struct {
	Task            string `json:"task"`
	Key             string `json:"key"`
	StateBytes      int64  `json:"state_bytes"`
	InFlightBytes   int64  `json:"in_flight_bytes"`
	InFlightRecords int64  `json:"in_flight_records"`
}

// partDesc is the content of chk-<id>/<task>/part.
type partDesc struct {
	Version    int    `json:"version"`
	Task       string `json:"task"`
	Chain      string `json:"chain"`
	Subtask    int    `json:"subtask"`
	Checkpoint uint64 `json:"checkpoint"`
	Unaligned  bool   `json:"unaligned"`
	// Ops lists the state blobs of the task's stateful operators.
	Ops []opObject `json:"ops,omitempty"`
	// Sources are the recorded read positions and event-time state of the
	// partitions a source task reads.
	Sources []partitionState `json:"sources,omitempty"`
	// InputWatermarks are the watermarks of the task's input channels at
	// the snapshot, in channel order.
	InputWatermarks []int64 `json:"input_watermarks,omitempty"`
	// OutputWatermark is the last watermark the task emitted.
	OutputWatermark int64 `json:"output_watermark"`
	// Channels is the in-flight data object, if any.
	Channels *objectRef `json:"channels,omitempty"`
	// InFlightRecords counts the persisted in-flight records.
	InFlightRecords int64 `json:"in_flight_records"`
}

type opObject struct {
	Stage     string `json:"stage"`
	Key       string `json:"key"`
	Bytes     int64  `json:"bytes"`
	KeyGroups int    `json:"key_groups"`
}

type objectRef struct {
	Key   string `json:"key"`
	Bytes int64  `json:"bytes"`
}

// partitionState is one source partition inside a part.
type partitionState struct {
	Input     string `json:"input"`
	Partition string `json:"partition"`
	Offset    int64  `json:"offset"`
	MaxTS     int64  `json:"max_ts"`
	Done      bool   `json:"done"`
}
