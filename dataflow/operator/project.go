package operator

import (
	"fmt"
	"math/bits"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Expr is a column expression of a projection: Col, ModConst or Const.
type Expr interface {
	// String renders the expression for messages.
	String() string
	// bind resolves column names against the input schema once, when the
	// job is built, so Process does no lookups.
	bind(in *arrow.Schema) (projBound, error)
}

// projBound is an Expr resolved against an input schema.
type projBound interface {
	field(name string) arrow.Field
	// eval returns a new reference to the column for batch.
	eval(p *project, batch arrow.RecordBatch) (arrow.Array, error)
}

// NamedExpr is one output column of a projection.
type NamedExpr struct {
	Name string
	Expr Expr
}

// Col is the input column called name, passed through without copying.
func Col(name string) Expr { return projCol{name} }

// ModConst is the int64 column name modulo m, floored: the result is in
// [0, m) for negative values too, so it can serve as a bucket number. m must
// be positive. Nulls stay null.
func ModConst(name string, m int64) Expr { return projMod{name, m} }

// Const is an int64 column whose every value is v.
func Const(v int64) Expr { return projConst{v} }

type projCol struct{ name string }

func (c projCol) String() string { return c.name }

func (c projCol) bind(in *arrow.Schema) (projBound, error) {
	idx := in.FieldIndices(c.name)
	if len(idx) != 1 {
		return nil, fmt.Errorf("column %q not found (or ambiguous) in schema %s", c.name, helpSchemaString(in))
	}
	return projColBound{idx[0], in.Field(idx[0])}, nil
}

type projColBound struct {
	idx int
	f   arrow.Field
}

func (c projColBound) field(name string) arrow.Field {
	return arrow.Field{Name: name, Type: c.f.Type, Nullable: c.f.Nullable}
}

func (c projColBound) eval(_ *project, batch arrow.RecordBatch) (arrow.Array, error) {
	if c.idx >= int(batch.NumCols()) {
		return nil, fmt.Errorf("batch has %d columns, column %q expected: schema %s",
			batch.NumCols(), c.f.Name, helpSchemaString(batch.Schema()))
	}
	a := batch.Column(c.idx)
	a.Retain()
	return a, nil
}

type projMod struct {
	name string
	m    int64
}

func (e projMod) String() string { return fmt.Sprintf("%s mod %d", e.name, e.m) }

func (e projMod) bind(in *arrow.Schema) (projBound, error) {
	if e.m <= 0 {
		return nil, fmt.Errorf("%s: modulus must be positive", e)
	}
	idx, err := Int64ColumnIndex(in, e.name)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", e, err)
	}
	return projModBound{idx, e.m, in.Field(idx).Nullable}, nil
}

type projModBound struct {
	idx      int
	m        int64
	nullable bool
}

func (e projModBound) field(name string) arrow.Field {
	return arrow.Field{Name: name, Type: arrow.PrimitiveTypes.Int64, Nullable: e.nullable}
}

func (e projModBound) eval(p *project, batch arrow.RecordBatch) (arrow.Array, error) {
	col, err := helpInt64Col(batch, e.idx)
	if err != nil {
		return nil, err
	}
	src := col.Int64Values()
	arr, dst := AllocInt64(p.alloc, len(src))
	if m := e.m; bits.OnesCount64(uint64(m)) == 1 {
		// Two's complement AND is already the floored modulo for 2^k.
		mask := m - 1
		for i, v := range src {
			dst[i] = v & mask
		}
	} else {
		for i, v := range src {
			r := v % m
			dst[i] = r + m&(r>>63) // add m back when r < 0, without a branch
		}
	}
	if col.NullN() == 0 {
		return arr, nil
	}
	// Carry the validity over; the values under nulls are harmless garbage.
	defer arr.Release()
	valid := memory.NewResizableBuffer(p.alloc)
	defer valid.Release()
	valid.Resize(int(bitutil.BytesForBits(int64(len(src)))))
	bitutil.CopyBitmap(col.NullBitmapBytes(), col.Data().Offset(), len(src), valid.Bytes(), 0)
	data := array.NewData(arrow.PrimitiveTypes.Int64, len(src),
		[]*memory.Buffer{valid, arr.Data().Buffers()[1]}, nil, col.NullN(), 0)
	defer data.Release()
	return array.NewInt64Data(data), nil
}

type projConst struct{ v int64 }

func (c projConst) String() string { return fmt.Sprint(c.v) }

func (c projConst) bind(*arrow.Schema) (projBound, error) { return &projConstBound{v: c.v}, nil }

type projConstBound struct {
	v int64
	// cache holds the longest constant column made so far; batches get
	// zero-copy slices of it, since emitted arrays are never mutated.
	cache *array.Int64
}

func (c *projConstBound) field(name string) arrow.Field {
	return arrow.Field{Name: name, Type: arrow.PrimitiveTypes.Int64}
}

func (c *projConstBound) eval(p *project, batch arrow.RecordBatch) (arrow.Array, error) {
	n := int(batch.NumRows())
	if c.cache == nil || c.cache.Len() < n {
		if c.cache != nil {
			c.cache.Release()
		}
		arr, vals := AllocInt64(p.alloc, n)
		for i := range vals {
			vals[i] = c.v
		}
		c.cache = arr
	}
	return array.NewSlice(c.cache, 0, int64(n)), nil
}

func (c *projConstBound) release() {
	if c.cache != nil {
		c.cache.Release()
		c.cache = nil
	}
}

// project computes one output column per expression.
type project struct {
	schema *arrow.Schema
	exprs  []projBound
	alloc  memory.Allocator
}

// NewProject returns a stateless operator whose output columns are exprs,
// evaluated against batches of schema in.
func NewProject(in *arrow.Schema, exprs []NamedExpr) (Operator, error) {
	if len(exprs) == 0 {
		return nil, fmt.Errorf("project: no output columns")
	}
	p := &project{alloc: memory.DefaultAllocator}
	fields := make([]arrow.Field, len(exprs))
	seen := make(map[string]bool, len(exprs))
	for i, ne := range exprs {
		if ne.Expr == nil {
			return nil, fmt.Errorf("project: output column %q has no expression", ne.Name)
		}
		if ne.Name == "" || seen[ne.Name] {
			return nil, fmt.Errorf("project: output column name %q is empty or repeated", ne.Name)
		}
		seen[ne.Name] = true
		b, err := ne.Expr.bind(in)
		if err != nil {
			return nil, fmt.Errorf("project: output column %q: %w", ne.Name, err)
		}
		p.exprs = append(p.exprs, b)
		fields[i] = b.field(ne.Name)
	}
	p.schema = arrow.NewSchema(fields, nil)
	return p, nil
}

func (p *project) OutputSchema() *arrow.Schema { return p.schema }

func (p *project) Open(ctx Context) error {
	p.alloc = helpAlloc(ctx.Alloc)
	return nil
}

func (p *project) Process(port int, batch arrow.RecordBatch, out Emitter) error {
	if port != 0 {
		return fmt.Errorf("project: input port %d does not exist", port)
	}
	n := int(batch.NumRows())
	if n == 0 {
		return nil
	}
	cols := make([]arrow.Array, len(p.exprs))
	for i, e := range p.exprs {
		c, err := e.eval(p, batch)
		if err != nil {
			for _, c := range cols[:i] {
				c.Release()
			}
			return fmt.Errorf("project: output column %q: %w", p.schema.Field(i).Name, err)
		}
		cols[i] = c
	}
	res := NewBatchOwning(p.schema, n, cols...)
	defer res.Release()
	return out.Emit(res)
}

func (p *project) AdvanceWatermark(int64, Emitter) error { return nil }
func (p *project) Flush(Emitter) error                   { return nil }

func (p *project) Close() error {
	for _, e := range p.exprs {
		if c, ok := e.(*projConstBound); ok {
			c.release()
		}
	}
	return nil
}
