package operator_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/keygroup"
	"github.com/rewind-engine/rewind/dataflow/operator"
)

var chainSchema = arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.PrimitiveTypes.Int64}}, nil)

// stepOp is a chain test operator. It copies every input batch into a new
// one allocated from its Context (so a checked allocator sees each hop);
// with hold it keeps the copies until Flush. Every call is logged.
type stepOp struct {
	name     string
	log      *[]string
	hold     bool
	alloc    memory.Allocator
	held     []arrow.RecordBatch
	openErr  error
	closeErr error
	closed   bool
}

func (o *stepOp) OutputSchema() *arrow.Schema { return chainSchema }

func (o *stepOp) Open(ctx operator.Context) error {
	o.alloc = ctx.Alloc
	*o.log = append(*o.log, "open "+o.name)
	return o.openErr
}

func (o *stepOp) Process(port int, b arrow.RecordBatch, out operator.Emitter) error {
	*o.log = append(*o.log, fmt.Sprintf("process %s port %d", o.name, port))
	in := b.Column(0).(interface{ Int64Values() []int64 }).Int64Values()
	arr, vals := operator.AllocInt64(o.alloc, len(in))
	copy(vals, in)
	cp := operator.NewBatchOwning(chainSchema, len(in), arr)
	if o.hold {
		o.held = append(o.held, cp)
		return nil
	}
	defer cp.Release()
	return out.Emit(cp)
}

func (o *stepOp) AdvanceWatermark(wm int64, out operator.Emitter) error {
	*o.log = append(*o.log, fmt.Sprintf("watermark %s %d", o.name, wm))
	return nil
}

func (o *stepOp) Flush(out operator.Emitter) error {
	*o.log = append(*o.log, "flush "+o.name)
	held := o.held
	o.held = nil
	for i, b := range held {
		err := out.Emit(b)
		b.Release()
		if err != nil {
			for _, r := range held[i+1:] {
				r.Release()
			}
			return err
		}
	}
	return nil
}

func (o *stepOp) Close() error {
	*o.log = append(*o.log, "close "+o.name)
	o.closed = true
	for _, b := range o.held {
		b.Release()
	}
	o.held = nil
	return o.closeErr
}

// stateOp is a stepOp with state: it records what Restore was given and
// snapshots one part per restored group.
type stateOp struct {
	stepOp
	restored []int
	snapErr  error
}

func (o *stateOp) StateSchema() *arrow.Schema { return chainSchema }

func (o *stateOp) Restore(parts []operator.KeyGroupState) error {
	for _, p := range parts {
		o.restored = append(o.restored, p.KeyGroup)
	}
	return nil
}

func (o *stateOp) Snapshot() ([]operator.KeyGroupState, error) {
	if o.snapErr != nil {
		return nil, o.snapErr
	}
	var parts []operator.KeyGroupState
	for _, kg := range o.restored {
		parts = append(parts, operator.KeyGroupState{KeyGroup: kg, Batch: int64Batch(o.alloc, int64(kg))})
	}
	return parts, nil
}

func int64Batch(alloc memory.Allocator, vs ...int64) arrow.RecordBatch {
	arr, vals := operator.AllocInt64(alloc, len(vs))
	copy(vals, vs)
	return operator.NewBatchOwning(chainSchema, len(vs), arr)
}

// collector is a sink that keeps (retains) what it is given.
type collector struct{ got []arrow.RecordBatch }

func (c *collector) Emit(b arrow.RecordBatch) error {
	b.Retain()
	c.got = append(c.got, b)
	return nil
}

func (c *collector) values() []int64 {
	var out []int64
	for _, b := range c.got {
		out = append(out, b.Column(0).(interface{ Int64Values() []int64 }).Int64Values()...)
	}
	return out
}

func (c *collector) release() {
	for _, b := range c.got {
		b.Release()
	}
	c.got = nil
}

func openSteps(t *testing.T, alloc memory.Allocator, ops ...operator.Operator) *operator.Chain {
	t.Helper()
	ch := &operator.Chain{}
	for i, op := range ops {
		if err := ch.Open(op, operator.Context{Alloc: alloc, Parallelism: 1, KeyGroups: keygroup.All}, i); err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
	}
	return ch
}

func TestChainLinksAndFlushesInOrder(t *testing.T) {
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer alloc.AssertSize(t, 0)
	var log []string
	// b holds until Flush: what it flushes must still pass through c and
	// c's flush, in that order.
	a := &stepOp{name: "a", log: &log}
	b := &stepOp{name: "b", log: &log, hold: true}
	c := &stepOp{name: "c", log: &log, hold: true}
	ch := openSteps(t, alloc, a, b, c)
	sink := &collector{}
	defer sink.release()
	ch.Link(sink)
	in := int64Batch(alloc, 1, 2, 3)
	if err := ch.Process(7, in); err != nil {
		t.Fatal(err)
	}
	in.Release()
	if len(sink.got) != 0 {
		t.Fatalf("sink got %d batches before Flush, want 0 (b holds)", len(sink.got))
	}
	log = nil
	if err := ch.Flush(); err != nil {
		t.Fatal(err)
	}
	want := []string{"flush a", "flush b", "process c port 2", "flush c"}
	if !slices.Equal(log, want) {
		t.Fatalf("flush calls %q, want %q", log, want)
	}
	if got := sink.values(); !slices.Equal(got, []int64{1, 2, 3}) {
		t.Fatalf("sink got %v, want [1 2 3]", got)
	}
	log = nil
	if err := ch.AdvanceWatermark(42); err != nil {
		t.Fatal(err)
	}
	want = []string{"watermark a 42", "flush a", "watermark b 42", "flush b", "watermark c 42", "flush c"}
	if !slices.Equal(log, want) {
		t.Fatalf("watermark calls %q, want %q", log, want)
	}
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestChainProcessUsesPortOnlyAtHead(t *testing.T) {
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer alloc.AssertSize(t, 0)
	var log []string
	ch := openSteps(t, alloc, &stepOp{name: "a", log: &log}, &stepOp{name: "b", log: &log})
	sink := &collector{}
	defer sink.release()
	ch.Link(sink)
	log = nil
	in := int64Batch(alloc, 5)
	defer in.Release()
	if err := ch.Process(3, in); err != nil {
		t.Fatal(err)
	}
	want := []string{"process a port 3", "process b port 1"}
	if !slices.Equal(log, want) {
		t.Fatalf("calls %q, want %q", log, want)
	}
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestChainWithoutOperatorsPassesToSink(t *testing.T) {
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer alloc.AssertSize(t, 0)
	var ch operator.Chain
	sink := &collector{}
	defer sink.release()
	ch.Link(sink)
	in := int64Batch(alloc, 9)
	defer in.Release()
	if err := ch.Process(0, in); err != nil {
		t.Fatal(err)
	}
	if err := ch.Flush(); err != nil {
		t.Fatal(err)
	}
	if got := sink.values(); !slices.Equal(got, []int64{9}) {
		t.Fatalf("sink got %v, want [9]", got)
	}
}

func TestChainClosesAllAfterErrors(t *testing.T) {
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer alloc.AssertSize(t, 0)
	var log []string
	errB, errC := errors.New("b failed to close"), errors.New("c failed to close")
	a := &stepOp{name: "a", log: &log, hold: true}
	b := &stepOp{name: "b", log: &log, closeErr: errB}
	c := &stepOp{name: "c", log: &log, closeErr: errC, openErr: errors.New("c failed to open")}
	ch := &operator.Chain{}
	ctx := operator.Context{Alloc: alloc, Parallelism: 1, KeyGroups: keygroup.All}
	for _, op := range []operator.Operator{a, b} {
		if err := ch.Open(op, ctx, 0); err != nil {
			t.Fatal(err)
		}
	}
	if err := ch.Open(c, ctx, 0); err == nil {
		t.Fatal("Open of c succeeded, want its error")
	}
	ch.Link(&collector{})
	// a holds a batch: Close must release it although later closes fail.
	in := int64Batch(alloc, 1)
	if err := ch.Process(0, in); err != nil {
		t.Fatal(err)
	}
	in.Release()
	if err := ch.Close(); !errors.Is(err, errB) {
		t.Fatalf("Close = %v, want the first error %v", err, errB)
	}
	for _, op := range []*stepOp{a, b, c} {
		if !op.closed {
			t.Errorf("%s not closed", op.name)
		}
	}
	if err := ch.Close(); err != nil || ch.Len() != 0 {
		t.Fatalf("second Close = %v with %d operators, want nil and 0", err, ch.Len())
	}
}

func TestChainRestoresOwnedKeyGroups(t *testing.T) {
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer alloc.AssertSize(t, 0)
	var log []string
	ch := &operator.Chain{}
	stateless := &stepOp{name: "a", log: &log}
	st := &stateOp{stepOp: stepOp{name: "b", log: &log}}
	empty := &stateOp{stepOp: stepOp{name: "c", log: &log}}
	own := keygroup.Range{Start: 10, End: 20}
	for _, op := range []operator.Operator{stateless, st, empty} {
		if err := ch.Open(op, operator.Context{Alloc: alloc, Parallelism: 2, KeyGroups: own}, 0); err != nil {
			t.Fatal(err)
		}
	}
	parts := []operator.KeyGroupState{
		{KeyGroup: 9, Batch: int64Batch(alloc, 9)},
		{KeyGroup: 10, Batch: int64Batch(alloc, 10)},
		{KeyGroup: 15}, // no batch: skipped
		{KeyGroup: 19, Batch: int64Batch(alloc, 19)},
		{KeyGroup: 20, Batch: int64Batch(alloc, 20)},
	}
	defer operator.ReleaseStates(parts)
	for i := 0; i < ch.Len(); i++ {
		p := parts
		if i == 2 {
			p = parts[:1] // none owned
		}
		if err := ch.Restore(i, p); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(st.restored, []int{10, 19}) {
		t.Fatalf("restored key groups %v, want [10 19]", st.restored)
	}
	if empty.restored != nil {
		t.Fatalf("an operator owning none of the parts was restored with %v", empty.restored)
	}
	var got []string
	if i, err := ch.Snapshot(func(i int, ps []operator.KeyGroupState) {
		for _, p := range ps {
			got = append(got, fmt.Sprintf("%d:%d", i, p.KeyGroup))
		}
		operator.ReleaseStates(ps)
	}); err != nil {
		t.Fatalf("Snapshot failed at %d: %v", i, err)
	}
	if !slices.Equal(got, []string{"1:10", "1:19"}) {
		t.Fatalf("snapshot %q, want [1:10 1:19]", got)
	}
	empty.snapErr = errors.New("pending output")
	if i, err := ch.Snapshot(func(_ int, ps []operator.KeyGroupState) { operator.ReleaseStates(ps) }); i != 2 || !errors.Is(err, empty.snapErr) {
		t.Fatalf("Snapshot = %d, %v; want 2, %v", i, err, empty.snapErr)
	}
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
}

// passOp emits its input batch unchanged: with it the chain's own cost
// per batch is all that is measured.
type passOp struct{ stepOp }

func (o *passOp) Process(_ int, b arrow.RecordBatch, out operator.Emitter) error {
	return out.Emit(b)
}

func TestChainProcessDoesNotAllocate(t *testing.T) {
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer alloc.AssertSize(t, 0)
	var log []string
	ch := openSteps(t, alloc, &passOp{stepOp{name: "a", log: &log}}, &passOp{stepOp{name: "b", log: &log}}, &passOp{stepOp{name: "c", log: &log}})
	n := 0
	ch.Link(operator.EmitFunc(func(arrow.RecordBatch) error { n++; return nil }))
	in := int64Batch(alloc, 1, 2)
	defer in.Release()
	allocs := testing.AllocsPerRun(100, func() {
		if err := ch.Process(0, in); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 || n == 0 {
		t.Fatalf("Process through 3 operators: %v allocations per batch, %d batches at the sink; want 0 and > 0", allocs, n)
	}
	if err := ch.Close(); err != nil {
		t.Fatal(err)
	}
}
