package bench

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestCostRowsAndRatios: a COST run of a right and a broken contestant
// has the reference's row first for every job, every contestant at every
// parallelism after it, ratios over the reference's median, the broken
// one's wrong results counted, and its files written and readable.
func TestCostRowsAndRatios(t *testing.T) {
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer alloc.AssertSize(t, 0)
	bp := doublesPlan(t, alloc, "fast", "lossy")
	bp.Repeat = 2
	p := CostPlan{Plan: bp, Jobs: []string{"keyed-count", "etl"}, Parallelisms: []int{1, 2}, Records: 20_000}
	res, err := RunCost(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rows) != 2*(1+2*2) {
		t.Fatalf("%d rows, want 10: %+v", len(res.Rows), res.Rows)
	}
	for i, row := range res.Rows {
		first := i%5 == 0
		if row.Reference != first || (first && (row.Contestant != "reference" || row.VsReference != 1)) {
			t.Errorf("row %d %+v: the reference's row must open each job, at ratio 1", i, row)
		}
		if len(row.RPS) != 2 || row.MedianRPS <= 0 {
			t.Errorf("row %d %+v: want two measured repeats", i, row)
		}
		ref := res.Rows[i-i%5].MedianRPS
		if got := row.MedianRPS / ref; !first && (row.VsReference < got*0.999 || row.VsReference > got*1.001) {
			t.Errorf("row %d: vs_reference %.4f, want median/reference %.4f", i, row.VsReference, got)
		}
		if want := 0; row.Contestant == "lossy" {
			if row.Wrong != 2 {
				t.Errorf("row %d %+v: the lossy contestant's two wrong results are not counted", i, row)
			}
		} else if row.Wrong != want || row.Error != "" {
			t.Errorf("row %d %+v: a right contestant flagged", i, row)
		}
	}
	dir := t.TempDir()
	files, err := res.WriteDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 4 {
		t.Fatalf("files %v", files)
	}
	var back CostResults
	data, err := os.ReadFile(filepath.Join(dir, "cost.json"))
	if err != nil || json.Unmarshal(data, &back) != nil || len(back.Rows) != len(res.Rows) {
		t.Fatalf("cost.json does not read back: %v", err)
	}
	svg, err := os.ReadFile(filepath.Join(dir, "cost.svg"))
	if err != nil {
		t.Fatal(err)
	}
	if err := xml.Unmarshal(svg, new(struct{})); err != nil {
		t.Errorf("cost.svg is not XML: %v", err)
	}
	var table strings.Builder
	if err := res.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "WRONG RESULT in 2 of 2") {
		t.Errorf("the table does not flag the lossy contestant:\n%s", table.String())
	}
}

// TestCostRefusesAnEmptyPlan: nothing to measure is an error, not an
// empty table.
func TestCostRefusesAnEmptyPlan(t *testing.T) {
	p := CostPlan{Plan: doublesPlan(t, memory.NewGoAllocator(), "fast"), Jobs: []string{"keyed-count"}, Records: 0, Parallelisms: []int{1}}
	if _, err := RunCost(context.Background(), p); err == nil {
		t.Fatal("a plan of 0 records ran")
	}
}
