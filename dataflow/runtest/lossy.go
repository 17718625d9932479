package runtest

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/source"
)

// DropFirstRows makes every source of sources drop the first record of
// each batch it reads: the input of a deliberately broken contestant,
// whose output the reference check must catch.
func DropFirstRows(sources map[string]source.Source) {
	for n, src := range sources {
		sources[n] = droppingSource{src}
	}
}

type droppingSource struct{ source.Source }

func (s droppingSource) Open(ctx context.Context, i int, pos source.Position, alloc memory.Allocator) (source.Reader, error) {
	r, err := s.Source.Open(ctx, i, pos, alloc)
	if err != nil {
		return nil, err
	}
	return droppingReader{r}, nil
}

type droppingReader struct{ source.Reader }

func (r droppingReader) Next(ctx context.Context, max int) (arrow.RecordBatch, source.Position, error) {
	b, pos, err := r.Reader.Next(ctx, max)
	if err != nil || b == nil || b.NumRows() < 2 {
		return b, pos, err
	}
	defer b.Release()
	return b.NewSlice(1, b.NumRows()), pos, nil
}
