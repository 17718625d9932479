package wire

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// The transport carries fixed-width columns only: every schema rewind's
// jobs and operator states use is int64, and a fixed-width array can be
// checked against its buffers completely and cheaply. A sender is refused
// a schema with another type before anything is sent.

// checkSchema says whether every field of s is fixed-width.
func checkSchema(s *arrow.Schema) error {
	for _, f := range s.Fields() {
		if _, ok := f.Type.(arrow.FixedWidthDataType); !ok || f.Type.ID() == arrow.BOOL {
			return fmt.Errorf("wire: field %q is %s; the transport carries fixed-width columns only", f.Name, f.Type)
		}
	}
	return nil
}

// validateArray checks that a decoded fixed-width array's buffers hold
// every row it claims, so reading it cannot run past them.
func validateArray(a arrow.Array) error {
	fw, ok := a.DataType().(arrow.FixedWidthDataType)
	if !ok || a.DataType().ID() == arrow.BOOL {
		return fmt.Errorf("type %s is not carried", a.DataType())
	}
	d := a.Data()
	end := d.Offset() + d.Len()
	if d.Offset() < 0 || d.Len() < 0 {
		return fmt.Errorf("offset %d, length %d", d.Offset(), d.Len())
	}
	bufs := d.Buffers()
	if len(bufs) != 2 {
		return fmt.Errorf("%d buffers, a fixed-width array has 2", len(bufs))
	}
	if v := bufs[0]; v != nil && v.Len() > 0 && v.Len() < (end+7)/8 {
		return fmt.Errorf("validity bitmap of %d bytes for %d rows", v.Len(), end)
	}
	if d.NullN() > 0 && (bufs[0] == nil || bufs[0].Len() == 0) {
		return fmt.Errorf("%d nulls and no validity bitmap", d.NullN())
	}
	width := fw.BitWidth() / 8
	if got, want := bufLen(bufs[1]), end*width; got < want {
		return fmt.Errorf("values buffer of %d bytes for %d rows of %d bytes", got, end, width)
	}
	return nil
}

func bufLen(b *memory.Buffer) int {
	if b == nil {
		return 0
	}
	return b.Len()
}
