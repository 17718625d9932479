package diskphase

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/runtest"
	"github.com/rewind-engine/rewind/dataflow/sink"
	"github.com/rewind-engine/rewind/dataflow/storage"
)

var modes = []sink.Mode{sink.Append, sink.Idempotent, sink.Transactional}

func TestNoCrashMatchesOracle(t *testing.T) {
	for _, name := range job.Names() {
		for _, mode := range modes {
			for _, jr := range []int64{0, 1500} {
				what := fmt.Sprintf("%s/%s/job-records=%d", name, mode, jr)
				t.Run(what, func(t *testing.T) {
					t.Parallel()
					var progress bytes.Buffer
					sc := &scenario{job: name, inputs: smallInputs(name, 4000, 7), mode: mode, jobRecords: jr, progress: &progress}
					o := sc.execute(t)
					o.checkOutput(t, what)
					o.checkReruns(t, what)
					o.checkNoDuplicates(t, what)
					if o.x.met.unitsRe != 0 {
						t.Fatalf("%s: %d re-runs without a crash", what, o.x.met.unitsRe)
					}
					jobs := 0
					for _, line := range strings.Split(strings.TrimSpace(progress.String()), "\n") {
						var ev map[string]any
						if err := json.Unmarshal([]byte(line), &ev); err != nil {
							t.Fatalf("progress line %q: %v", line, err)
						}
						if ev["event"] == "job_committed" {
							jobs++
							for _, k := range []string{"map_ms", "commit_ms", "bytes_materialised", "units_run", "units_rerun", "records_read", "records_reread"} {
								if _, ok := ev[k]; !ok {
									t.Fatalf("progress line %q lacks %s", line, k)
								}
							}
						}
					}
					if jobs != o.summary.Checkpoints.Completed || jobs < 1 {
						t.Fatalf("%d job_committed lines, %d committed jobs", jobs, o.summary.Checkpoints.Completed)
					}
					if jr > 0 && jobs < 2 {
						t.Fatalf("job-records=%d gave %d finite jobs", jr, jobs)
					}
					if o.summary.LatencyMs == nil || o.summary.RecordsIn == 0 {
						t.Fatalf("summary lacks latency or records: %+v", o.summary)
					}
				})
			}
		}
	}
}

// TestEveryNamedPoint crashes every built-in job at every named point, at
// the first and a later occurrence.
func TestEveryNamedPoint(t *testing.T) {
	for _, name := range job.Names() {
		for _, point := range failPoints {
			for _, occ := range []int{1, 3} {
				if name == "etl" && point == pointPhase {
					continue // map-only: there is no reduce phase to start
				}
				mode := modes[(len(name)+len(point)+occ)%len(modes)]
				what := fmt.Sprintf("%s/%s/occurrence=%d/%s", name, point, occ, mode)
				t.Run(what, func(t *testing.T) {
					t.Parallel()
					sc := &scenario{job: name, inputs: smallInputs(name, 2400, 3), mode: mode, jobRecords: 800,
						fails: []fault.Spec{{Point: point, Occurrence: occ}}}
					o := sc.execute(t)
					o.checkOutput(t, what)
					o.checkReruns(t, what)
					if len(o.env.Faults.Fired) != 1 {
						t.Fatalf("%s: the fault did not fire", what)
					}
					if !(mode == sink.Append && point == pointMidCommit) {
						o.checkNoDuplicates(t, what)
					}
					if strings.HasPrefix(point, "unit.") && o.x.met.unitsRe != 1 {
						t.Fatalf("%s: a crash inside one unit re-ran %d units", what, o.x.met.unitsRe)
					}
				})
			}
		}
	}
}

// TestWorkerKillsRerunOnlyTheirUnit kills each worker at several read
// counts: the unit it was running is re-run, on another worker when there
// is one, and nothing else.
func TestWorkerKillsRerunOnlyTheirUnit(t *testing.T) {
	for _, name := range []string{"keyed-count", "join", "etl"} {
		for _, after := range []int64{1, 700, 1900} {
			for w := range 2 {
				what := fmt.Sprintf("%s/worker=%d/after=%d", name, w, after)
				t.Run(what, func(t *testing.T) {
					t.Parallel()
					sc := &scenario{job: name, inputs: smallInputs(name, 3000, 5), jobRecords: 1500, mode: sink.Append,
						fails: []fault.Spec{{Worker: w, AfterRecords: after}}}
					o := sc.execute(t)
					o.checkOutput(t, what)
					o.checkReruns(t, what)
					o.checkNoDuplicates(t, what)
					a := o.accounting()
					total := 0
					for u, n := range a.interrupted {
						total += n
						// The re-run went to the other worker.
						var workers []int
						for _, ev := range o.trace {
							if ev.Kind == "start" && ev.Unit == u {
								workers = append(workers, ev.Worker)
							}
						}
						if workers[len(workers)-1] == w {
							t.Fatalf("%s: unit %s re-ran on the killed worker %d (attempts on %v)", what, u, w, workers)
						}
					}
					if total > 1 {
						t.Fatalf("%s: one worker kill interrupted %d units", what, total)
					}
				})
			}
		}
	}
}

// TestLostMapFileRerunsOnlyItsProducer deletes or corrupts one map file
// once its unit is in the ledger: exactly that map unit runs again (and the
// reduce unit that found the damage resumes), nothing else.
func TestLostMapFileRerunsOnlyItsProducer(t *testing.T) {
	for _, corrupt := range []bool{false, true} {
		for _, name := range []string{"keyed-count", "windowed-sum", "join", "etl"} {
			what := fmt.Sprintf("%s/corrupt=%v", name, corrupt)
			t.Run(what, func(t *testing.T) {
				victim := UnitID{Job: 1, Kind: kindMap, Index: 1}
				done := false
				var victimRange int64 // records of the victim's split range, from its ledger entry
				sc := &scenario{job: name, inputs: smallInputs(name, 3000, 11), jobRecords: 1500, mode: sink.Idempotent,
					onTrace: func(ev traceEvent, st storage.Store, x *execution) {
						if done || ev.Kind != "recorded" || ev.Unit != victim {
							return
						}
						done = true
						var e MapEntry
						if data, err := st.Get(context.Background(), x.names.ledger(victim)); err != nil || json.Unmarshal(data, &e) != nil {
							t.Errorf("reading the ledger entry of %s: %v", victim, err)
						}
						victimRange = e.End - e.Start
						damage(t, st, x, victim, corrupt)
					}}
				o := sc.execute(t)
				o.checkOutput(t, what)
				o.checkReruns(t, what)
				o.checkNoDuplicates(t, what)
				a := o.accounting()
				if a.lost[victim] != 1 || len(a.lost) != 1 {
					t.Fatalf("%s: lost files reported for %v, want exactly %s", what, a.lost, victim)
				}
				// The decision went through lineage.Plan: one piece lost,
				// one rebuilt, re-reading exactly the producer's range.
				lp := o.summary.LostPieces
				if lp == nil || lp.Recoveries != 1 || lp.PiecesLost != 1 || lp.PiecesRebuilt != 1 || lp.RebuildMs == nil ||
					victimRange <= 0 || lp.RecordsReread != victimRange {
					t.Fatalf("%s: lost_pieces %+v, want 1 lost and rebuilt re-reading the victim's %d records", what, lp, victimRange)
				}
				for u, n := range a.starts {
					switch {
					case u == victim && n != 2:
						t.Fatalf("%s: the producer ran %d times, want 2", what, n)
					case u.Kind == kindMap && u != victim && n != 1:
						t.Fatalf("%s: map unit %s ran %d times; only the producer may re-run", what, u, n)
					case u.Kind == kindReduce && n != 1+a.interrupted[u]:
						t.Fatalf("%s: reduce unit %s ran %d times", what, u, n)
					}
				}
			})
		}
	}
}

// damage deletes or corrupts the first non-empty file unit u recorded.
func damage(t testing.TB, st storage.Store, x *execution, u UnitID, corrupt bool) {
	ctx := context.Background()
	data, err := st.Get(ctx, x.names.ledger(u))
	if err != nil {
		t.Errorf("reading ledger of %s: %v", u, err)
		return
	}
	var files []FileRef
	if u.Kind == kindMap {
		var e MapEntry
		_ = json.Unmarshal(data, &e)
		files = e.Files
	} else {
		var e ReduceEntry
		_ = json.Unmarshal(data, &e)
		if e.State != nil {
			files = append(files, *e.State)
		}
		files = append(files, e.Out)
	}
	for _, f := range files {
		if f.Name == "" {
			continue
		}
		if !corrupt {
			if err := st.Delete(ctx, f.Name); err != nil {
				t.Errorf("deleting %s: %v", f.Name, err)
			}
			return
		}
		raw := st.(storage.RawAccess)
		b, err := raw.RawGet(ctx, f.Name)
		if err != nil {
			t.Errorf("raw get %s: %v", f.Name, err)
			return
		}
		b[len(b)/2] ^= 0x40
		if err := raw.RawPut(ctx, f.Name, b); err != nil {
			t.Errorf("raw put %s: %v", f.Name, err)
		}
		return
	}
	t.Errorf("unit %s recorded no file to damage", u)
}

// TestLostStateFileRebuildsItsReduceUnit deletes the state table job 0
// carried into job 1: the reduce unit that made it is re-run for its state
// only (its output was committed already), then job 1 goes on.
func TestLostStateFileRebuildsItsReduceUnit(t *testing.T) {
	for _, name := range []string{"keyed-count", "windowed-sum", "join"} {
		t.Run(name, func(t *testing.T) {
			victim := UnitID{Job: 0, Kind: kindReduce, Index: 0}
			done := false
			sc := &scenario{job: name, inputs: smallInputs(name, 3000, 13), jobRecords: 1000, mode: sink.Append,
				onTrace: func(ev traceEvent, st storage.Store, x *execution) {
					if done || ev.Kind != "committed" || ev.Job != 0 {
						return
					}
					done = true
					damage(t, st, x, victim, false)
				}}
			o := sc.execute(t)
			o.checkOutput(t, name)
			o.checkReruns(t, name)
			o.checkNoDuplicates(t, name)
			a := o.accounting()
			if a.lost[victim] != 1 || a.starts[victim] != 2 || len(a.lost) != 1 {
				t.Fatalf("lost %v, producer started %d times", a.lost, a.starts[victim])
			}
			// A reduce unit's files carry state: not a stateless piece.
			if lp := o.summary.LostPieces; lp == nil || lp.PiecesLost != 0 || lp.RebuildMs != nil {
				t.Fatalf("lost_pieces %+v: a state table is not a lineage piece", lp)
			}
		})
	}
}

// TestLostOutputFileBeforeCommit deletes a reduce unit's staged output
// before its job commits: the commit finds it, that unit is re-run.
func TestLostOutputFileBeforeCommit(t *testing.T) {
	victim := UnitID{Job: 0, Kind: kindReduce, Index: 1}
	done := false
	sc := &scenario{job: "windowed-sum", inputs: smallInputs("windowed-sum", 3000, 17), mode: sink.Transactional,
		onTrace: func(ev traceEvent, st storage.Store, x *execution) {
			if done || ev.Kind != "recorded" || ev.Unit != victim {
				return
			}
			done = true
			ctx := context.Background()
			data, _ := st.Get(ctx, x.names.ledger(victim))
			var e ReduceEntry
			_ = json.Unmarshal(data, &e)
			if err := st.Delete(ctx, e.Out.Name); err != nil {
				t.Error(err)
			}
		}}
	o := sc.execute(t)
	o.checkOutput(t, "lost output")
	o.checkReruns(t, "lost output")
	o.checkNoDuplicates(t, "lost output")
	if a := o.accounting(); a.starts[victim] != 2 || len(a.lost) != 1 {
		t.Fatalf("lost %v, producer started %d times", a.lost, a.starts[victim])
	}
}

// TestCoordinatorRestartKeepsFinishedUnits crashes the coordinator right
// after each of several ledger writes: the new coordinator rebuilds the plan
// from durable storage and never starts a recorded unit again.
func TestCoordinatorRestartKeepsFinishedUnits(t *testing.T) {
	for _, occ := range []int{1, 4, 7, 10} {
		for _, point := range []string{pointAfterRecord, pointBeforeRecord, pointAfterPlan, pointPhase} {
			what := fmt.Sprintf("%s/%d", point, occ)
			t.Run(what, func(t *testing.T) {
				sc := &scenario{job: "keyed-count", inputs: smallInputs("keyed-count", 4000, 19), jobRecords: 2000,
					fails: []fault.Spec{{Point: point, Occurrence: occ}}}
				o := sc.execute(t)
				o.checkOutput(t, what)
				o.checkReruns(t, what)
				recorded := map[UnitID]bool{}
				restarted := false
				for _, ev := range o.trace {
					switch ev.Kind {
					case "recorded":
						recorded[ev.Unit] = true
					case "restart":
						restarted = true
					case "start":
						if restarted && recorded[ev.Unit] {
							t.Fatalf("%s: unit %s was in the ledger before the restart and ran again", what, ev.Unit)
						}
					}
				}
				if len(o.env.Faults.Fired) == 1 && !restarted {
					t.Fatalf("%s: no restart after the coordinator crash", what)
				}
			})
		}
	}
}

// TestMaterialisedFilesReadableByPqarrow reads map, state and output files
// a real run wrote with arrow-go's pqarrow and checks their schemas.
func TestMaterialisedFilesReadableByPqarrow(t *testing.T) {
	checked := map[string]bool{}
	sc := &scenario{job: "windowed-sum", inputs: smallInputs("windowed-sum", 4000, 23), jobRecords: 2000,
		onTrace: func(ev traceEvent, st storage.Store, x *execution) {
			if ev.Kind != "recorded" {
				return
			}
			ctx := context.Background()
			data, err := st.Get(ctx, x.names.ledger(ev.Unit))
			if err != nil {
				t.Error(err)
				return
			}
			type file struct {
				ref   FileRef
				names []string
				kind  string
			}
			var files []file
			if ev.Unit.Kind == kindMap {
				var e MapEntry
				_ = json.Unmarshal(data, &e)
				for _, f := range e.Files {
					files = append(files, file{f, x.topo.inputs[0].names, "map"})
				}
			} else {
				var e ReduceEntry
				_ = json.Unmarshal(data, &e)
				files = append(files, file{e.Out, x.topo.outNames, "out"})
				files = append(files, file{*e.State, []string{"_kg", "key", "window_start", "count", "sum", "watermark"}, "state"})
			}
			for _, f := range files {
				if f.ref.Name == "" {
					continue
				}
				b, err := st.Get(ctx, f.ref.Name)
				if err != nil {
					t.Error(err)
					return
				}
				alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
				tbl, err := pqarrow.ReadTable(ctx, bytes.NewReader(b), nil, pqarrow.ArrowReadProperties{}, alloc)
				if err != nil {
					t.Errorf("pqarrow reading %s: %v", f.ref.Name, err)
					return
				}
				got := fieldNames(tbl.Schema())
				if strings.Join(got, ",") != strings.Join(f.names, ",") || tbl.NumRows() != f.ref.Rows {
					t.Errorf("%s: pqarrow sees columns %v and %d rows, want %v and %d", f.ref.Name, got, tbl.NumRows(), f.names, f.ref.Rows)
				}
				for _, fd := range tbl.Schema().Fields() {
					if fd.Type.ID() != arrow.INT64 || fd.Nullable {
						t.Errorf("%s: column %v", f.ref.Name, fd)
					}
				}
				tbl.Release()
				alloc.AssertSize(t, 0)
				checked[f.kind] = true
			}
		}}
	o := sc.execute(t)
	o.checkOutput(t, "pqarrow")
	for _, k := range []string{"map", "out", "state"} {
		if !checked[k] {
			t.Fatalf("no %s file was checked", k)
		}
	}
}

func TestJobIntervalMode(t *testing.T) {
	for _, name := range []string{"keyed-count", "windowed-sum"} {
		t.Run(name, func(t *testing.T) {
			sc := &scenario{job: name, inputs: map[string]string{job.DefaultInput: "gen:records=6000,keys=100,rate=40000,seed=3"},
				jobInterval: 40 * time.Millisecond, fails: []fault.Spec{{Worker: 1, AfterRecords: 2500}}}
			o := sc.execute(t)
			o.checkOutput(t, name)
			o.checkReruns(t, name)
			if o.summary.Checkpoints.Completed < 2 {
				t.Fatalf("interval mode ran %d finite jobs", o.summary.Checkpoints.Completed)
			}
		})
	}
}

func TestEndlessInputNeedsARange(t *testing.T) {
	sc := &scenario{job: "keyed-count", inputs: map[string]string{job.DefaultInput: "gen:records=0"}}
	o := sc.execute(t)
	if o.err == nil || !strings.Contains(o.err.Error(), "--job-records") {
		t.Fatalf("endless input without a range: err %v", o.err)
	}
}

// TestForgetfulSourceCountsLostRecords: a push feed cannot be re-read, so a
// map unit re-run after a crash misses what its dead attempt consumed; the
// summary says how many records that was instead of claiming correctness.
func TestForgetfulSourceCountsLostRecords(t *testing.T) {
	sc := &scenario{job: "keyed-count", inputs: map[string]string{job.DefaultInput: "push:records=4000,keys=50,seed=2"},
		jobRecords: 2000, readBatch: 200, noOracle: true, fails: []fault.Spec{{Worker: 0, AfterRecords: 2500}}}
	o := sc.execute(t)
	if o.err != nil {
		t.Fatal(o.err)
	}
	o.checkReruns(t, "push")
	if o.summary.Crashes != 1 || o.summary.LostRecords == 0 {
		t.Fatalf("crashes %d, lost records %d: want one crash and a count of what it lost", o.summary.Crashes, o.summary.LostRecords)
	}
	// Every record was either reflected in the output or reported lost.
	var total int64
	for _, r := range o.table.Rows {
		total += r[1] // count
	}
	if got := o.x.met.distinct + o.summary.LostRecords; got != 4000 {
		t.Fatalf("records in committed jobs (%d) plus lost (%d) = %d, want 4000", o.x.met.distinct, o.summary.LostRecords, got)
	}
	found := false
	for _, n := range o.summary.Notes {
		found = found || strings.Contains(n, "forgetful")
	}
	if !found {
		t.Fatalf("no note about the forgetful input: %v", o.summary.Notes)
	}
	if total > o.x.met.distinct {
		t.Fatalf("output counts %d records, the committed jobs read only %d", total, o.x.met.distinct)
	}
	t.Logf("lost %d records of 4000 to one crash; the output counts %d", o.summary.LostRecords, total)
}

// TestEndlessInputStopsOnCancel runs an endless input as finite jobs until
// the context ends: the committed jobs are reported, the run is not an
// error. The context ends once two jobs committed (a fixed 600 ms could end
// before the first on a loaded machine), so the run is cut in its third.
func TestEndlessInputStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := run.Config{Job: "keyed-count", Params: job.DefaultParams, Inputs: map[string]string{job.DefaultInput: "gen:records=0,rate=20000"},
		Output: filepath.Join(fastDir(t), "out"), OutputFormat: sink.Parquet, SinkMode: sink.Transactional,
		Storage: "file://" + fastDir(t), Parallelism: 2, Options: Options{JobRecords: 400},
		Progress: &runtest.EventStop{Match: []string{`"event":"job_committed"`}, N: 2, Stop: cancel}}
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	env, err := run.Prepare(ctx, cfg, alloc, slog.New(slog.NewTextHandler(io.Discard, nil)), true, run.OutputResume)
	if err != nil {
		t.Fatal(err)
	}
	s, err := Executor{}.Run(ctx, env)
	if err != nil {
		t.Fatalf("endless run stopped by its context: %v", err)
	}
	if s.Checkpoints.Completed < 2 || ctx.Err() != context.Canceled {
		t.Fatalf("%d finite jobs committed, context %v: want the run stopped by the cancel after the second", s.Checkpoints.Completed, ctx.Err())
	}
	if err := env.Close(); err != nil {
		t.Fatal(err)
	}
	alloc.AssertSize(t, 0)
}

// TestDisorderWithinBoundsAcrossFiniteJobs: out-of-order event time within
// --max-disorder yields the oracle's answer across finite-job seams, with a
// worker kill thrown in; beyond it, late rows are dropped and counted.
func TestDisorderWithinBoundsAcrossFiniteJobs(t *testing.T) {
	for _, name := range []string{"windowed-sum", "join"} {
		t.Run(name, func(t *testing.T) {
			p := job.DefaultParams
			p.MaxDisorder, p.Window, p.JoinWindow = 40, 100, 30
			in := map[string]string{job.DefaultInput: "gen:records=4000,keys=30,disorder=40,seed=9"}
			if name == "join" {
				in = map[string]string{job.InputOrders: "gen:records=2000,keys=200,disorder=40,seed=9",
					job.InputPayments: "gen:records=2000,keys=200,disorder=40,seed=10"}
			}
			sc := &scenario{job: name, inputs: in, params: &p, jobRecords: 700, fails: []fault.Spec{{Worker: 0, AfterRecords: 1500}}}
			o := sc.execute(t)
			o.checkOutput(t, name)
			o.checkReruns(t, name)

			p.MaxDisorder = 0
			sc = &scenario{job: name, inputs: in, params: &p, jobRecords: 700, noOracle: true}
			o = sc.execute(t)
			if o.err != nil {
				t.Fatal(o.err)
			}
			if o.summary.LateRows == 0 {
				t.Fatalf("disorder 40ms with --max-disorder 0 dropped no late rows")
			}
		})
	}
}

// TestRerunWritesIdenticalFiles crashes a unit after it wrote its files and
// before the ledger had it: the re-run writes byte-identical files, map
// units in chunks cut at the same rows.
func TestRerunWritesIdenticalFiles(t *testing.T) {
	for _, tc := range []struct {
		job string
		occ int
	}{{"keyed-count", 1}, {"keyed-count", 5}, {"join", 9}, {"windowed-sum", 5}, {"etl", 2}} {
		what := fmt.Sprintf("%s/occurrence=%d", tc.job, tc.occ)
		t.Run(what, func(t *testing.T) {
			compared := 0
			var victim UnitID
			hit := false
			sc := &scenario{job: tc.job, inputs: smallInputs(tc.job, 4000, 29), parallelism: 2, chunkRows: 300,
				fails: []fault.Spec{{Point: pointBeforeLedger, Occurrence: tc.occ}},
				onTrace: func(ev traceEvent, st storage.Store, x *execution) {
					if ev.Kind == "interrupted" {
						victim, hit = ev.Unit, true
					}
					if !hit || ev.Kind != "recorded" || ev.Unit != victim {
						return
					}
					ctx := context.Background()
					dirs := []string{x.names.outDir(victim.Job) + fmt.Sprintf("p%05d/", victim.Index),
						x.names.stateDir(victim.Job) + fmt.Sprintf("p%05d/", victim.Index)}
					if victim.Kind == kindMap {
						dirs = []string{x.names.mapDir(victim.Job) + fmt.Sprintf("s%05d/", victim.Index)}
					}
					// Group by file within the attempt directories.
					byFile := map[string][][]byte{}
					for _, dir := range dirs {
						objs, err := st.List(ctx, dir)
						if err != nil {
							t.Error(err)
							return
						}
						for _, o := range objs {
							rest := strings.TrimPrefix(o.Name, dir)
							_, file, _ := strings.Cut(rest, "/")
							if victim.Kind == kindReduce {
								// a<attempt>.c<k>.parquet: chunk k of either attempt.
								_, chunk, _ := strings.Cut(rest, ".")
								file = dir + chunk
							}
							b, err := st.Get(ctx, o.Name)
							if err != nil {
								t.Error(err)
								return
							}
							byFile[file] = append(byFile[file], b)
						}
					}
					for f, bs := range byFile {
						if len(bs) != 2 {
							t.Errorf("%s: %d attempts of %s in storage, want 2", victim, len(bs), f)
							continue
						}
						if !bytes.Equal(bs[0], bs[1]) {
							t.Errorf("%s: the re-run wrote a different %s", victim, f)
						}
						compared++
					}
				}}
			o := sc.execute(t)
			o.checkOutput(t, what)
			if compared == 0 {
				t.Fatalf("%s: no file of %s compared", what, victim)
			}
		})
	}
}

// TestMidWriteLeavesNothingVisible kills units half-way through encoding
// their first file (a map unit's first chunk, while it still reads):
// storage holds no object of the dead attempt at all (files are encoded in
// memory and published whole by one Put).
func TestMidWriteLeavesNothingVisible(t *testing.T) {
	for _, occ := range []int{1, 2, 5, 6} {
		what := fmt.Sprintf("occurrence=%d", occ)
		t.Run(what, func(t *testing.T) {
			checked := false
			sc := &scenario{job: "keyed-count", inputs: smallInputs("keyed-count", 4000, 31), chunkRows: 300,
				fails: []fault.Spec{{Point: pointMidWrite, Occurrence: occ}},
				onTrace: func(ev traceEvent, st storage.Store, x *execution) {
					if ev.Kind != "interrupted" {
						return
					}
					objs, err := st.List(context.Background(), x.names.jobDir(ev.Unit.Job))
					if err != nil {
						t.Error(err)
						return
					}
					for _, o := range objs {
						if strings.Contains(o.Name, fmt.Sprintf("/a%d/", ev.Attempt)) || strings.Contains(o.Name, fmt.Sprintf("/a%d.c", ev.Attempt)) {
							t.Errorf("%s: the attempt killed mid-write left %s", ev.Unit, o.Name)
						}
					}
					checked = true
				}}
			o := sc.execute(t)
			o.checkOutput(t, what)
			o.checkReruns(t, what)
			if !checked {
				t.Fatalf("%s: no attempt was interrupted", what)
			}
		})
	}
}
