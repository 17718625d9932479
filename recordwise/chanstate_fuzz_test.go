package recordwise

import (
	"bytes"
	"encoding/json"
	"errors"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/runtest"
)

func releaseStreams(streams []chanStream) {
	for _, s := range streams {
		for _, it := range s.items {
			it.release()
		}
	}
}

// sameStreams compares decoded streams item by item, batches by value.
func sameStreams(a, b []chanStream) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].dir != b[i].dir || a[i].channel != b[i].channel || len(a[i].items) != len(b[i].items) {
			return false
		}
		for j, x := range a[i].items {
			y := b[i].items[j]
			if x.kind != y.kind || x.wm != y.wm || (x.batch == nil) != (y.batch == nil) {
				return false
			}
			if x.batch != nil && !array.RecordEqual(x.batch, y.batch) {
				return false
			}
		}
	}
	return true
}

// FuzzDecodeChannels: any bytes either decode to channel state that
// encodes and decodes again to the same streams, or give errChanCorrupt;
// never a panic, an allocation larger than the input, or a leak.
func FuzzDecodeChannels(f *testing.F) {
	mem := memory.NewGoAllocator()
	seeds := [][]chanStream{
		nil,
		{{dir: dirOutput, channel: 0, items: []item{{kind: kWatermark, wm: -5}}}},
		{
			{dir: dirInput, channel: 3, items: []item{batchOf(mem, 1, 2, 3), {kind: kWatermark, wm: 42}, batchOf(mem, 4)}},
			{dir: dirOutput, channel: 1, items: []item{batchOf(mem, 9)}},
		},
	}
	for _, s := range seeds {
		var buf bytes.Buffer
		if err := encodeChannels(&buf, s); err != nil {
			f.Fatal(err)
		}
		releaseStreams(s)
		f.Add(buf.Bytes())
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		checked := memory.NewCheckedAllocator(memory.NewGoAllocator())
		defer checked.AssertSize(t, 0)
		alloc := runtest.BoundedAlloc{Allocator: checked, T: t, Limit: len(data) + 64}
		streams, err := decodeChannels(data, alloc)
		if err != nil {
			if !errors.Is(err, errChanCorrupt) {
				t.Fatalf("error %v does not wrap errChanCorrupt", err)
			}
			if streams != nil {
				t.Fatalf("error %v with %d streams", err, len(streams))
			}
			return
		}
		defer releaseStreams(streams)
		var again bytes.Buffer
		if err := encodeChannels(&again, streams); err != nil {
			t.Fatalf("decoded channel state does not encode: %v", err)
		}
		back, err := decodeChannels(again.Bytes(), checked)
		if err != nil {
			t.Fatalf("re-encoded channel state does not decode: %v", err)
		}
		defer releaseStreams(back)
		if !sameStreams(streams, back) {
			t.Fatal("decode, encode, decode changed the streams")
		}
	})
}

// FuzzParseChkName: a name is taken as a checkpoint's only when it is
// exactly what chkDir writes for that id, followed by the rest.
func FuzzParseChkName(f *testing.F) {
	f.Add(metadataKey(1))
	f.Add(partKey(42, "count-1"))
	f.Add(channelsKey(1<<63, "src-0"))
	f.Add("chk-00000000000000000000/_metadata")
	f.Add("chk-+0000000000000000001/x")
	f.Fuzz(func(t *testing.T, name string) {
		id, rest, ok := parseChkName(name)
		if !ok {
			return
		}
		if id == 0 {
			t.Fatalf("%q parsed as checkpoint 0", name)
		}
		if got := chkDir(id) + rest; got != name {
			t.Fatalf("%q parsed as checkpoint %d + %q, which names %q", name, id, rest, got)
		}
	})
}

// FuzzCheckpointJSON: the metadata and part descriptor that decode
// encode back to objects that decode the same.
func FuzzCheckpointJSON(f *testing.F) {
	meta, _ := json.Marshal(metadata{Version: layoutVersion, Job: "windowed-sum", RunID: "r1", Checkpoint: 3,
		Parallelism: 2, Barriers: "aligned", TriggeredAt: "2026-01-01T00:00:00Z",
		Parts: []metaPart{{Task: "count-0", Key: partKey(3, "count-0"), StateBytes: 10}}})
	part, _ := json.Marshal(partDesc{Version: layoutVersion, Task: "src-0", Chain: "src", Checkpoint: 3, Unaligned: true,
		Ops:             []opObject{{Stage: "count", Key: opStateKey(3, "src-0", "count"), Bytes: 100, KeyGroups: 4}},
		Sources:         []partitionState{{Input: "in", Partition: "p0", Offset: 7, MaxTS: 9}},
		InputWatermarks: []int64{1, -2}, Channels: &objectRef{Key: channelsKey(3, "src-0"), Bytes: 5}, InFlightRecords: 2})
	f.Add(meta)
	f.Add(part)
	f.Fuzz(func(t *testing.T, data []byte) {
		roundTrip(t, data, &metadata{}, &metadata{})
		roundTrip(t, data, &partDesc{}, &partDesc{})
	})
}

// roundTrip: when data decodes into v, v encodes, that decodes into back,
// and back encodes to the same bytes (JSON's nil and empty slices are the
// same object here, so encodings are compared, not values).
func roundTrip[T any](t *testing.T, data []byte, v, back *T) {
	if json.Unmarshal(data, v) != nil {
		return
	}
	enc, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("decoded %T does not encode: %v", v, err)
	}
	if err := json.Unmarshal(enc, back); err != nil {
		t.Fatalf("re-encoded %T does not decode: %v", v, err)
	}
	if again, _ := json.Marshal(back); !bytes.Equal(enc, again) {
		t.Fatalf("%T changed in a round trip:\n %s\n %s", v, enc, again)
	}
}
