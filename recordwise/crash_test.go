package recordwise

import (
	"flag"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/sink"
)

func kill(worker int, after int64) fault.Spec {
	return fault.Spec{Worker: worker, AfterRecords: after}
}

func at(point string, occurrence int) fault.Spec {
	return fault.Spec{Worker: -1, Point: point, Occurrence: occurrence}
}

// TestWorkerKill kills a worker mid-run for every job, barrier setting and
// sink: the restored run reaches the oracle's output.
func TestWorkerKill(t *testing.T) {
	for _, j := range jobs {
		for _, m := range modes {
			for _, s := range sinks {
				t.Run(fmt.Sprintf("%s/%s/%s", j, m, s), func(t *testing.T) {
					sc := &scenario{job: j, barriers: m, mode: s, inputs: inputs(j, 6000, 100000, 3),
						fails: []fault.Spec{kill(1, 3500)}}
					o := sc.execute(t)
					o.check(t, sc.String())
					if o.summary.Crashes != 1 {
						t.Fatalf("%s: %d crashes, want 1", sc, o.summary.Crashes)
					}
				})
			}
		}
	}
}

// TestNamedPoints crashes at every named point, for every barrier setting,
// rotating jobs and sinks so that every job and every sink meets every
// point at least once over the settings.
func TestNamedPoints(t *testing.T) {
	n := 0
	// A later occurrence may not come in one short run, but it must come in
	// at least one of the settings, or the point is not tested past its
	// first occurrence. (The check is over the settings that ran: replaying
	// a single later-occurrence subtest with -run can fail it alone.)
	type count struct{ ran, fired int }
	later := map[string]*count{}
	defer func() {
		for p, c := range later {
			if c.ran > 0 && c.fired == 0 {
				t.Errorf("%s: a later occurrence never fired in %d runs; lengthen the inputs", p, c.ran)
			}
		}
	}()
	for _, p := range failPoints {
		later[p] = &count{}
		for mi, m := range modes {
			for _, occ := range []int{1, 3} {
				j := jobs[(n+mi)%len(jobs)]
				s := sinks[(n/len(jobs)+occ)%len(sinks)]
				m := m
				n++
				if p == PointDuringAlignment && occ > 1 {
					// Only aligned barriers on a job with a task of several
					// inputs ever align: every later-occurrence setting of
					// this point is one, not one in three.
					if m.barriers == "unaligned" {
						m = modes[0]
					}
					if j == "etl" {
						j = "join"
					}
				}
				// A later occurrence needs several checkpoints before the
				// paced input ends: 60 ms of input gave a loaded -race
				// machine (GOMAXPROCS 2, load 13) fewer than two periodic
				// checkpoints, so later occurrences run on 200 ms.
				rate := 100000
				if occ > 1 {
					rate = 30000
				}
				t.Run(fmt.Sprintf("%s/%s/%s/%s/%d", p, j, m, s, occ), func(t *testing.T) {
					sc := &scenario{job: j, barriers: m, mode: s, inputs: inputs(j, 6000, rate, int64(n)),
						fails: []fault.Spec{at(p, occ)}}
					if p == PointMidRestore {
						// Recovery needs crashes to recover from first, and
						// a checkpoint completed before each: the kills come
						// 100 and 200 ms into the input (30 and 60 ms were
						// too early for a loaded machine's first checkpoint).
						sc.inputs = inputs(j, 10000, 30000, int64(n))
						sc.fails = []fault.Spec{kill(0, 3000), kill(1, 6000), at(p, (occ+1)/2)}
					}
					o := sc.execute(t)
					o.check(t, sc.String())
					pending := o.env.Faults.Pending()
					if occ > 1 {
						later[p].ran++
						if len(pending) == 0 {
							later[p].fired++
						}
					}
					if len(pending) > 0 {
						if occ > 1 {
							return // a short run may not get that far; checked over all settings below
						}
						if p == PointDuringAlignment && (m.barriers == "unaligned" || j == "etl") {
							return // unaligned checkpoints never align; etl has no task with several inputs
						}
						if p == PointMidRestore && restoresFromCheckpoint(o.report) < (occ+1)/2 {
							return // the kills came before any checkpoint completed: nothing to restore
						}
						t.Fatalf("%s: fault never fired: %v", sc, pending)
					}
				})
			}
		}
	}
}

// TestCrashBeforeMetadataUsesPreviousPoint crashes the coordinator after
// every part of a checkpoint is durable but before its metadata is written:
// the restart must ignore that checkpoint (parts but no metadata), discard
// it, and restore the previous complete one.
func TestCrashBeforeMetadataUsesPreviousPoint(t *testing.T) {
	for _, m := range modes {
		t.Run(m.String(), func(t *testing.T) {
			var seen []RestoreInfo
			sc := &scenario{job: "keyed-count", barriers: m, mode: sink.Transactional, inputs: inputs("keyed-count", 30000, 100000, 7),
				fails: []fault.Spec{at(PointAfterPartsBeforeMetadata, 3)}}
			// 300 ms of paced input: three checkpoints reach their metadata
			// write even when a loaded machine makes each take tens of ms.
			o := sc.execute(t)
			o.check(t, sc.String())
			seen = o.report.Restores
			if len(seen) != 2 {
				t.Fatalf("%d starts, want 2", len(seen))
			}
			r := seen[1]
			if len(r.Listing.PartsOnly) != 1 {
				t.Fatalf("after the crash storage held parts-only checkpoints %v, want exactly the one being completed", r.Listing.PartsOnly)
			}
			crashed := r.Listing.PartsOnly[0]
			if !r.Plan.Found || r.From >= crashed {
				t.Fatalf("restored %d (found %v) with checkpoint %d lacking metadata: want an older one", r.From, r.Plan.Found, crashed)
			}
			// Checkpoint 3 was the third to reach the metadata write; the two
			// before it completed, so the previous recovery point is the
			// newest of those.
			var completed []uint64
			for _, h := range o.report.History {
				if h.Attempt == 0 && h.Status == "completed" {
					completed = append(completed, h.ID)
				}
			}
			if len(completed) == 0 || uint64(r.From) != completed[len(completed)-1] {
				t.Fatalf("restored %d, but the newest checkpoint completed before the crash was %v", r.From, completed)
			}
			if len(r.Plan.Discard) != 1 || r.Plan.Discard[0] != crashed {
				t.Fatalf("discarded %v, want [%d]", r.Plan.Discard, crashed)
			}
			// Every part of the crashed checkpoint was durable: the parts
			// alone are never enough.
			tasks := 3 * 2 // source, count+sink... per subtask: see the plan
			pl, err := buildPlan(o.env.Job, 2)
			if err != nil {
				t.Fatal(err)
			}
			tasks = len(pl.chains) * 2
			if got := r.Parts[crashed]; got != tasks {
				t.Fatalf("crashed checkpoint %d had %d durable parts, want all %d", crashed, got, tasks)
			}
		})
	}
}

func restoresFromCheckpoint(r *Report) int {
	n := 0
	for _, x := range r.Restores {
		if x.From > 0 {
			n++
		}
	}
	return n
}

var flagFull = flag.Bool("rw.full", false, "TestFullPointMatrix: every named point for every job, barrier setting and sink")

// TestFullPointMatrix crashes at every named point for every job × barrier
// setting × sink (468 runs; off by default, -rw.full turns it on).
func TestFullPointMatrix(t *testing.T) {
	if !*flagFull {
		t.Skip("-rw.full not given; TestNamedPoints covers every point with rotating jobs and sinks")
	}
	n := 0
	for _, p := range failPoints {
		for _, j := range jobs {
			for _, m := range modes {
				for _, s := range sinks {
					n++
					t.Run(fmt.Sprintf("%s/%s/%s/%s", p, j, m, s), func(t *testing.T) {
						sc := &scenario{job: j, barriers: m, mode: s, inputs: inputs(j, 6000, 100000, int64(n)),
							fails: []fault.Spec{at(p, 1+n%3)}}
						if p == PointMidRestore {
							sc.fails = []fault.Spec{kill(0, 3000), at(p, 1)}
						}
						sc.execute(t).check(t, sc.String())
					})
				}
			}
		}
	}
}

// TestDetectDelay: the survivors keep running until the crash is noticed;
// the bill shows the modelled heartbeat timeout and the output is exact.
func TestDetectDelay(t *testing.T) {
	for _, s := range sinks {
		sc := &scenario{job: "keyed-count", mode: s, inputs: inputs("keyed-count", 8000, 100000, 17),
			detect: 30 * time.Millisecond, fails: []fault.Spec{kill(1, 4000)}}
		o := sc.execute(t)
		o.check(t, sc.String())
		if len(o.summary.Recoveries) != 1 {
			t.Fatalf("%s: %d recoveries", sc, len(o.summary.Recoveries))
		}
		r := o.summary.Recoveries[0]
		if r.DetectMs == nil || *r.DetectMs < 30 || r.RestoreMs == nil || r.ReprocessedRecords == nil || r.CatchUpMs == nil {
			t.Fatalf("%s: recovery bill %+v: want detect >= 30 ms and every figure", sc, r)
		}
	}
}

// TestCrashAfterMetadataCountsThePointComplete: the coordinator dies right
// after the metadata of checkpoint 2 became durable, before it acted on
// it. The restart restores checkpoint 2, and the history and counts say
// it completed (not failed), as its durable metadata makes it.
func TestCrashAfterMetadataCountsThePointComplete(t *testing.T) {
	sc := &scenario{job: "keyed-count", barriers: barrierSetting{"aligned", 0}, mode: sink.Transactional,
		inputs: inputs("keyed-count", 30000, 100000, 9), fails: []fault.Spec{at(PointAfterMetadata, 2)}}
	o := sc.execute(t)
	o.check(t, sc.String())
	if len(o.report.Restores) != 2 {
		t.Fatalf("%d starts, want 2", len(o.report.Restores))
	}
	from := uint64(o.report.Restores[1].From)
	if from == 0 {
		t.Fatal("the restart did not restore the checkpoint whose metadata was durable")
	}
	n := 0
	for _, h := range o.report.History {
		if h.ID == from && h.Attempt == 0 {
			n++
			if h.Status != "completed" {
				t.Errorf("checkpoint %d restored from is %s in the history", from, h.Status)
			}
		}
	}
	if n != 1 {
		t.Fatalf("checkpoint %d appears %d times in the first attempt's history, want once", from, n)
	}
	completed := 0
	for _, h := range o.report.History {
		if h.Status == "completed" {
			completed++
		}
	}
	if o.summary.Checkpoints.Completed != completed {
		t.Fatalf("summary counts %d completed, history holds %d", o.summary.Checkpoints.Completed, completed)
	}
}

// TestTimedKillModelledReplacement: a worker killed at a time, with the
// heartbeat timeout and the replacement modelled, bills both as modelled
// figures at least as long as configured, reads its checkpoint back (and
// says how many bytes), and the output is exact.
func TestTimedKillModelledReplacement(t *testing.T) {
	sc := &scenario{job: "keyed-count", mode: sink.Idempotent, inputs: inputs("keyed-count", 30000, 100000, 23),
		detect: 200 * time.Millisecond, acquire: 100 * time.Millisecond,
		fails: []fault.Spec{{Worker: 0, At: 100 * time.Millisecond}}}
	o := sc.execute(t)
	o.check(t, sc.String())
	if len(o.summary.Recoveries) != 1 || len(o.report.Restores) != 2 {
		t.Fatalf("%s: %d recoveries, %d starts; want one crash and a restart", sc, len(o.summary.Recoveries), len(o.report.Restores))
	}
	r := o.summary.Recoveries[0]
	if r.DetectMs == nil || *r.DetectMs < 200 || r.AcquireMs == nil || *r.AcquireMs < 100 || !slices.Equal(r.Modelled, []string{"detect", "acquire"}) {
		t.Fatalf("%s: bill %+v: want detect >= 200 ms, acquire >= 100 ms, both modelled", sc, r)
	}
	if r.AtMs == nil || *r.AtMs < 100 {
		t.Fatalf("%s: at_ms %v, want >= 100", sc, r.AtMs)
	}
	if o.report.Restores[1].From == 0 {
		t.Fatalf("%s: the restart restored no checkpoint; the kill at 100 ms should follow several", sc)
	}
	if r.RestoreBytes == nil || *r.RestoreBytes <= 0 || r.RestoreMs == nil {
		t.Fatalf("%s: restore %v ms, %v bytes; want the checkpoint's bytes", sc, r.RestoreMs, r.RestoreBytes)
	}
}
