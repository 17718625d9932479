package oracle_test

import (
	"context"
	"fmt"
	"io"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/oracle"
	"github.com/rewind-engine/rewind/dataflow/sink"
	"github.com/rewind-engine/rewind/dataflow/source"
)

// memSource is a bounded, re-readable source over fixed rows, one slice of
// rows (id, key, value, ts) per partition.
type memSource struct{ parts [][][4]int64 }

func (m memSource) Spec() string { return "mem:" }
func (m memSource) Partitions() []string {
	out := make([]string, len(m.parts))
	for i := range out {
		out[i] = fmt.Sprintf("m%d", i)
	}
	return out
}
func (memSource) Rereadable() bool { return true }
func (memSource) Bounded() bool    { return true }
func (memSource) Close() error     { return nil }
func (m memSource) Open(_ context.Context, i int, pos source.Position, alloc memory.Allocator) (source.Reader, error) {
	return &memReader{rows: m.parts[i], name: fmt.Sprintf("m%d", i), off: int(pos.Offset), alloc: alloc}, nil
}

type memReader struct {
	rows  [][4]int64
	name  string
	off   int
	alloc memory.Allocator
}

func (r *memReader) Next(_ context.Context, max int) (arrow.RecordBatch, source.Position, error) {
	if r.off >= len(r.rows) {
		return nil, source.Position{Partition: r.name, Offset: int64(r.off)}, io.EOF
	}
	end := min(len(r.rows), r.off+max)
	b := array.NewRecordBuilder(r.alloc, source.Schema)
	defer b.Release()
	for _, row := range r.rows[r.off:end] {
		for c := range 4 {
			b.Field(c).(*array.Int64Builder).Append(row[c])
		}
	}
	r.off = end
	return b.NewRecordBatch(), source.Position{Partition: r.name, Offset: int64(end)}, nil
}
func (*memReader) Lost() int64  { return 0 }
func (*memReader) Close() error { return nil }

func table(t *testing.T, j *job.Job, rows [][]int64) *sink.Table {
	t.Helper()
	tb, _, err := sink.ResolveRows(j.Output, sink.ColumnNames(j.Output.Schema), rows)
	if err != nil {
		t.Fatal(err)
	}
	return tb
}

// The expected outputs below were computed by hand from the inputs; the
// comments show the arithmetic.
func TestGoldenJobs(t *testing.T) {
	cases := []struct {
		job    string
		params job.Params
		inputs map[string]memSource
		want   [][]int64
	}{
		{
			job: "keyed-count", params: job.DefaultParams,
			inputs: map[string]memSource{job.DefaultInput: {parts: [][][4]int64{
				{{0, 1, 5, 0}, {1, 2, -3, 1}, {2, 1, 7, 2}, {3, 3, 0, 3}, {4, 2, 4, 4}, {5, 1, -1, 5}},
				{{6, 3, 10, 1}, {7, 2, 2, 2}, {8, 3, 1, 3}},
			}}},
			// key 1: 5+7 (−1 dropped); key 2: 4+2 (−3 dropped); key 3: 0+10+1.
			want: [][]int64{{1, 2, 12, 2}, {2, 2, 6, 2}, {3, 3, 11, 3}},
		},
		{
			job: "windowed-sum", params: job.Params{Window: 10, JoinWindow: 0, MaxDisorder: 0},
			inputs: map[string]memSource{job.DefaultInput: {parts: [][][4]int64{
				{{0, 1, 5, 0}, {1, 1, 3, 9}, {2, 1, 4, 10}, {3, 2, -1, 12}, {4, 2, 6, 25}},
				{{5, 1, 1, 19}, {6, 2, 2, 20}, {7, 1, 8, -1}},
			}}},
			// key 1: [-10,0) {8}; [0,10) {5,3}; [10,20) {4,1}. key 2: [20,30) {6,2}; −1 dropped.
			want: [][]int64{{1, -10, 1, 8, 0}, {1, 0, 2, 8, 0}, {1, 10, 2, 5, 0}, {2, 20, 2, 8, 0}},
		},
		{
			job: "join", params: job.Params{Window: 1000, JoinWindow: 5},
			inputs: map[string]memSource{
				job.InputOrders:   {parts: [][][4]int64{{{100, 1, 50, 10}, {101, 1, 60, 20}}, {{102, 2, -5, 0}}}},
				job.InputPayments: {parts: [][][4]int64{{{200, 1, 7, 15}, {201, 1, 8, 26}}, {{202, 2, 9, 5}, {203, 3, 1, 10}}}},
			},
			// |10−15|=5 ok, |10−26|=16 no, |20−15|=5 ok, |20−26|=6 no, |0−5|=5 ok; key 3 has no order.
			want: [][]int64{{1, 100, 200, 50, 7, 0}, {1, 101, 200, 60, 7, 0}, {2, 102, 202, -5, 9, 0}},
		},
		{
			job: "etl", params: job.DefaultParams,
			inputs: map[string]memSource{job.DefaultInput: {parts: [][][4]int64{
				{{0, 17, 3, 0}, {1, -3, 2, 1}, {2, 5, -1, 2}, {3, 32, 0, 3}},
			}}},
			// 17 mod 16 = 1, −3 mod 16 = 13 (floor), 32 mod 16 = 0; value −1 dropped.
			want: [][]int64{{0, 17, 3, 0, 1, 0}, {1, -3, 2, 1, 13, 0}, {3, 32, 0, 3, 0, 0}},
		},
	}
	for _, c := range cases {
		t.Run(c.job, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			j, err := job.Build(c.job, c.params)
			if err != nil {
				t.Fatal(err)
			}
			srcs := map[string]source.Source{}
			for n, s := range c.inputs {
				srcs[n] = s
			}
			res, err := oracle.Evaluate(context.Background(), j, srcs, mem)
			if err != nil {
				t.Fatal(err)
			}
			if d := res.Table.Diff(table(t, j, c.want), 20); d != "" {
				t.Fatalf("%s output differs from the hand-computed answer:\n%s", c.job, d)
			}
			if res.LateRows != 0 {
				t.Fatalf("late rows %d, want 0 (the oracle holds the watermark until the end)", res.LateRows)
			}
		})
	}
}

func TestEvaluateRefusesEndlessInput(t *testing.T) {
	j, err := job.Build("etl", job.DefaultParams)
	if err != nil {
		t.Fatal(err)
	}
	src, err := source.Open("gen:records=0", source.Options{DefaultSeed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	_, err = oracle.Evaluate(context.Background(), j, map[string]source.Source{job.DefaultInput: src}, memory.NewGoAllocator())
	if err == nil {
		t.Fatal("an endless input was accepted by the oracle")
	}
}
