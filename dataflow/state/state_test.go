package state_test

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/operator"
	"github.com/rewind-engine/rewind/dataflow/operator/optest"
	"github.com/rewind-engine/rewind/dataflow/state"
)

var schema = arrow.NewSchema([]arrow.Field{
	{Name: "key", Type: arrow.PrimitiveTypes.Int64},
	{Name: "count", Type: arrow.PrimitiveTypes.Int64},
}, nil)

func parts(mem memory.Allocator) []operator.KeyGroupState {
	return []operator.KeyGroupState{
		{KeyGroup: 3, Batch: optest.Batch(mem, schema, [][]int64{{1, 2}, {-5, 7}})},
		{KeyGroup: 4, Batch: optest.Batch(mem, schema, nil)},
		{KeyGroup: 127, Batch: optest.Batch(mem, schema, [][]int64{{9, 1}})},
	}
}

func TestRoundTrip(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	in := parts(mem)
	defer operator.ReleaseStates(in)

	var buf bytes.Buffer
	buf.WriteString("prefix") // EncodeAll appends
	if err := state.EncodeAll(&buf, "count/3", in); err != nil {
		t.Fatal(err)
	}
	blob := buf.Bytes()[len("prefix"):]
	h, err := state.ReadHeader(blob)
	if err != nil {
		t.Fatal(err)
	}
	if h.OpID != "count/3" || !slices.Equal(h.KeyGroups, []int{3, 4, 127}) || h.IPCBytes == 0 {
		t.Fatalf("header %+v", h)
	}
	for name, decode := range decoders(mem) {
		id, out, err := decode(blob)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if id != "count/3" || len(out) != len(in) {
			t.Fatalf("%s: decoded %q with %d parts", name, id, len(out))
		}
		for i := range in {
			if out[i].KeyGroup != in[i].KeyGroup || !out[i].Batch.Schema().Equal(schema) ||
				!slices.EqualFunc(optest.Rows(out[i].Batch), optest.Rows(in[i].Batch), slices.Equal) {
				t.Fatalf("%s: part %d: got kg %d %v, want kg %d %v", name, i, out[i].KeyGroup, optest.Rows(out[i].Batch),
					in[i].KeyGroup, optest.Rows(in[i].Batch))
			}
		}
		operator.ReleaseStates(out)
	}
}

// decoders are DecodeAll (copying into mem) and DecodeAllShared.
func decoders(mem memory.Allocator) map[string]func([]byte) (string, []operator.KeyGroupState, error) {
	return map[string]func([]byte) (string, []operator.KeyGroupState, error){
		"copy":   func(b []byte) (string, []operator.KeyGroupState, error) { return state.DecodeAll(b, mem) },
		"shared": state.DecodeAllShared,
	}
}

func TestSingleAndEmpty(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	in := parts(mem)
	defer operator.ReleaseStates(in)

	var buf bytes.Buffer
	if err := state.Encode(&buf, "op", in[2]); err != nil {
		t.Fatal(err)
	}
	id, p, err := state.Decode(buf.Bytes(), mem)
	if err != nil {
		t.Fatal(err)
	}
	if id != "op" || p.KeyGroup != 127 || !slices.EqualFunc(optest.Rows(p.Batch), [][]int64{{9, 1}}, slices.Equal) {
		t.Fatalf("got %q kg %d %v", id, p.KeyGroup, optest.Rows(p.Batch))
	}
	p.Batch.Release()

	buf.Reset()
	if err := state.EncodeAll(&buf, "empty", nil); err != nil {
		t.Fatal(err)
	}
	id, out, err := state.DecodeAll(buf.Bytes(), mem)
	if err != nil || id != "empty" || len(out) != 0 {
		t.Fatalf("empty: %q %v %v", id, out, err)
	}
	if _, _, err := state.Decode(buf.Bytes(), mem); err == nil {
		t.Fatal("Decode of a blob without parts succeeded")
	}

	buf.Reset()
	if err := state.EncodeAll(&buf, "two", in[:2]); err != nil {
		t.Fatal(err)
	}
	if _, _, err := state.Decode(buf.Bytes(), mem); err == nil || !strings.Contains(err.Error(), "2 key groups") {
		t.Fatalf("Decode of two parts: %v", err)
	}
}

func TestEncodeRejects(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	in := parts(mem)
	defer operator.ReleaseStates(in)
	other := optest.Batch(mem, arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int64}}, nil), nil)
	defer other.Release()
	var buf bytes.Buffer
	for name, ps := range map[string][]operator.KeyGroupState{
		"mixed schemas":  {in[0], {KeyGroup: 5, Batch: other}},
		"key group 128":  {{KeyGroup: 128, Batch: other}},
		"negative group": {{KeyGroup: -1, Batch: other}},
		"nil batch":      {{KeyGroup: 1}},
	} {
		if err := state.EncodeAll(&buf, "op", ps); err == nil {
			t.Errorf("%s: encoded", name)
		}
	}
	if err := state.EncodeAll(&buf, strings.Repeat("x", 1<<16), nil); err == nil {
		t.Error("64 KiB operator id encoded")
	}
}

// encodeSmall returns a small encoded snapshot.
func encodeSmall(t *testing.T, mem memory.Allocator) []byte {
	t.Helper()
	in := parts(mem)
	defer operator.ReleaseStates(in)
	var buf bytes.Buffer
	if err := state.EncodeAll(&buf, "op", in); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestEveryFlippedByteIsDetected(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	blob := encodeSmall(t, mem)
	for name, decode := range decoders(mem) {
		for i := range blob {
			for _, x := range []byte{0x01, 0x80, 0xff} {
				bad := slices.Clone(blob)
				bad[i] ^= x
				_, out, err := decode(bad)
				if err == nil {
					operator.ReleaseStates(out)
					t.Fatalf("%s: byte %d of %d xor %#x: decoded without error", name, i, len(blob), x)
				}
				if !errors.Is(err, state.ErrCorrupt) {
					t.Fatalf("%s: byte %d: error %v does not wrap ErrCorrupt", name, i, err)
				}
			}
		}
	}
}

func TestEveryTruncationIsDetected(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	blob := encodeSmall(t, mem)
	for name, decode := range decoders(mem) {
		for n := range len(blob) {
			_, out, err := decode(blob[:n])
			if err == nil {
				operator.ReleaseStates(out)
				t.Fatalf("%s: truncated to %d of %d bytes: decoded without error", name, n, len(blob))
			}
			if !errors.Is(err, state.ErrCorrupt) {
				t.Fatalf("%s: truncated to %d: error %v does not wrap ErrCorrupt", name, n, err)
			}
		}
		// Trailing bytes are damage too.
		if _, out, err := decode(append(slices.Clone(blob), 0)); err == nil {
			operator.ReleaseStates(out)
			t.Fatalf("%s: blob with a trailing byte decoded", name)
		}
	}
}

func TestDecodeAllSharedDoesNotCopy(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	blob := encodeSmall(t, mem)
	_, out, err := state.DecodeAllShared(blob)
	if err != nil {
		t.Fatal(err)
	}
	defer operator.ReleaseStates(out)
	v := out[0].Batch.Column(0).(*array.Int64).Int64Values()
	p := uintptr(unsafe.Pointer(&v[0]))
	start := uintptr(unsafe.Pointer(&blob[0]))
	if p < start || p >= start+uintptr(len(blob)) {
		t.Fatal("shared decode copied the values")
	}
}
