package bench

import (
	"context"
	"io"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/sink"
	"github.com/rewind-engine/rewind/microbatch"
	"github.com/rewind-engine/rewind/recordwise"
	"github.com/rewind-engine/rewind/reference"
)

func TestCalibrationInputs(t *testing.T) {
	got, err := calibrationInputs(map[string]string{
		"orders":   "gen:records=100000,keys=100000,partitions=2,rate=50000,seed=1",
		"payments": "gen:keys=100000,rate=50000,seed=2",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"orders":   "gen:records=0,keys=100000,partitions=2,seed=1",
		"payments": "gen:records=0,keys=100000,seed=2",
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("calibration inputs\n got %v\nwant %v", got, want)
	}
	for _, ins := range []map[string]string{nil, {"in": "file:./data"}} {
		if _, err := calibrationInputs(ins); err == nil {
			t.Errorf("calibrationInputs(%v) accepted", ins)
		}
	}
}

func TestCapacityOf(t *testing.T) {
	c, err := capacityOf("x", 300000, 1500)
	if err != nil || c != (Capacity{Contestant: "x", RPS: 200000, WallMs: 1500}) {
		t.Fatalf("capacityOf = %+v, %v", c, err)
	}
	for _, tc := range []struct {
		n  int64
		ms float64
	}{{0, 100}, {10, 0}, {10, -1}} {
		if _, err := capacityOf("x", tc.n, tc.ms); err == nil {
			t.Errorf("capacityOf(%d, %v) accepted", tc.n, tc.ms)
		}
	}
	if m := Capacities([]Capacity{{Contestant: "a", RPS: 1}, {Contestant: "b", RPS: 2}}); !reflect.DeepEqual(m, map[string]float64{"a": 1, "b": 2}) {
		t.Fatalf("Capacities = %v", m)
	}
}

// TestCalibrate: every contestant gets a capacity from an unpaced run of
// about calibrationTime: the scenario's input paced at 2,000 records/s
// has 20,000 records, so a capacity far above the pace shows the pace was
// dropped, and the wall time shows the end was too.
func TestCalibrate(t *testing.T) {
	old := calibrationTime
	calibrationTime = 300 * time.Millisecond
	defer func() { calibrationTime = old }()
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	execs := map[string]run.Executor{}
	for _, e := range []run.Executor{reference.Executor{}, microbatch.Executor{}, recordwise.Executor{}} {
		execs[e.Name()] = e
	}
	p := Plan{
		Config: run.Config{Job: "keyed-count", Params: job.DefaultParams, SinkMode: sink.Append, OutputFormat: sink.Parquet,
			Parallelism: 2, Seed: 1, Inputs: map[string]string{job.DefaultInput: "gen:records=20000,keys=100,partitions=2,rate=2000,seed=3"}},
		Options: map[string]run.Options{"recordwise": recordwise.Options{CheckpointInterval: 50 * time.Millisecond},
			"microbatch": microbatch.Options{Trigger: 20 * time.Millisecond}},
		Executors: execs, Scratch: t.TempDir(), Alloc: mem, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	var progress strings.Builder
	p.Progress = &progress
	cs := []Contestant{{Executor: "microbatch"}, {Executor: "recordwise", Variant: "unaligned"}}
	caps, err := Calibrate(context.Background(), p, cs)
	if err != nil {
		t.Fatal(err)
	}
	if len(caps) != 2 {
		t.Fatalf("%d capacities for 2 contestants", len(caps))
	}
	for i, c := range caps {
		if c.Contestant != cs[i].Name() || c.RPS < 20000 || c.WallMs < 250 || c.WallMs > 5000 {
			t.Errorf("capacity %+v: want %s above 20,000 records/s (unpaced) over about 300 ms (endless, stopped)", c, cs[i].Name())
		}
		if !strings.Contains(progress.String(), "calibration ["+string(rune('1'+i))+"/2] "+cs[i].Name()+": ") {
			t.Errorf("no progress line for %s in %q", cs[i].Name(), progress.String())
		}
	}
}
