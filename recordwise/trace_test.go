package recordwise

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/spacetime"
	"github.com/rewind-engine/rewind/dataflow/storage"
	"github.com/rewind-engine/rewind/recordwise/checkpoint"
)

// TestTraceGolden runs the small traced runs of testdata/trace and
// compares their time-space events, normalised so that timing does not
// matter (spacetime.Normalise), with the expectations. Rewrite them with
// -rewrite.
//
//	run job=join barriers=aligned records=40 rate=200 checkpoint-after=10 slow=payments fail=...
//
// checkpoint-after lists the record counts at which a checkpoint is
// triggered (instead of periodic ones), so the story has a fixed number of
// them; slow=CHAIN delays that chain's output channels by 20 ms, so an
// unaligned barrier overtakes records on them; sink-rate=N throttles the
// tasks that write to the sink to N rows/s, so every channel into them is
// full when a barrier overtakes its records; hold=N holds the parts of
// checkpoints 1..N back until their checkpoint is given up, so with
// checkpoint-timeout-ms=T they time out whatever the scheduling.
func TestTraceGolden(t *testing.T) {
	datadriven.Walk(t, "testdata/trace", func(t *testing.T, path string) {
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if d.Cmd != "run" {
				d.Fatalf(t, "unknown command %s", d.Cmd)
			}
			sc := traceScenario(t, d)
			o := sc.execute(t)
			if o.err != nil {
				d.Fatalf(t, "%s: %v", sc, o.err)
			}
			o.check(t, sc.String())
			// The executor is run without the run driver, which fills
			// the summary's UnfiredFaults: ask the injector.
			if pending := o.env.Faults.Pending(); len(pending) > 0 {
				d.Fatalf(t, "%s: the crash did not fire: %v", sc, pending)
			}
			events := dropLateParts(sc.trace.Events())
			checkReplayMarked(t, events)
			return spacetime.Normalise(sc.trace.Lanes(), events)
		})
	})
}

// traceScenario reads a run command's arguments.
func traceScenario(t *testing.T, d *datadriven.TestData) *scenario {
	jobName, barriers, failSpec := "join", "aligned", ""
	records, rate, interval := 40, 200, 20
	d.MaybeScanArgs(t, "job", &jobName)
	d.MaybeScanArgs(t, "barriers", &barriers)
	d.MaybeScanArgs(t, "records", &records)
	d.MaybeScanArgs(t, "rate", &rate)
	d.MaybeScanArgs(t, "interval-ms", &interval)
	d.MaybeScanArgs(t, "fail", &failSpec)
	var after []string
	d.MaybeScanArgs(t, "checkpoint-after", &after)
	slow := ""
	d.MaybeScanArgs(t, "slow", &slow)
	sinkRate := 0
	d.MaybeScanArgs(t, "sink-rate", &sinkRate)
	hold, cpTimeout := 0, 0
	d.MaybeScanArgs(t, "hold", &hold)
	d.MaybeScanArgs(t, "checkpoint-timeout-ms", &cpTimeout)
	sc := &scenario{job: jobName, barriers: barrierSetting{barriers: barriers, timeout: 0},
		interval: time.Duration(interval) * time.Millisecond, trace: spacetime.NewRecorder(time.Now())}
	sc.inputs = traceInputs(jobName, records, rate)
	for _, a := range after {
		n, err := strconv.ParseInt(a, 10, 64)
		if err != nil {
			d.Fatalf(t, "checkpoint-after=%s: %v", a, err)
		}
		sc.opts.hooks.triggerAfter = append(sc.opts.hooks.triggerAfter, n)
	}
	sc.opts.SinkTaskRate = float64(sinkRate)
	sc.cpTimeout = time.Duration(cpTimeout) * time.Millisecond
	if hold > 0 {
		hs := newHoldStore(nil, checkpoint.ID(hold))
		sc.progress = releaseOnAbort{hs}
		sc.wrapStore = func(s storage.Store) storage.Store {
			hs.Store = s
			return hs
		}
	}
	if slow != "" {
		sc.opts.hooks.channelDelay = func(from string, _ int, _ string, _ int) time.Duration {
			if from == slow {
				return 20 * time.Millisecond
			}
			return 0
		}
	}
	if failSpec != "" {
		sp, err := fault.Parse(failSpec)
		if err != nil {
			d.Fatalf(t, "fail=%s: %v", failSpec, err)
		}
		sc.fails = []fault.Spec{sp}
	}
	return sc
}

// traceInputs are two partitions per input, paced at rate records/s.
func traceInputs(jobName string, records, rate int) map[string]string {
	gen := func(n int, seed int64) string {
		return fmt.Sprintf("gen:records=%d,keys=%d,partitions=2,rate=%d,seed=%d", n, max(n/4, 1), rate, seed)
	}
	if jobName == "join" {
		return map[string]string{"orders": gen(records/2, 1), "payments": gen(records/2, 2)}
	}
	return map[string]string{job.DefaultInput: gen(records, 1)}
}

// dropLateParts leaves out the parts that became durable after their
// checkpoint had been given up: a held part's write races the abort that
// releases it, so whether it lands is timing, not protocol.
func dropLateParts(events []spacetime.Event) []spacetime.Event {
	failed := map[int64]bool{}
	kept := events[:0:0]
	for _, e := range events {
		switch {
		case e.Kind == spacetime.PointFailed:
			failed[e.ID] = true
		case e.Kind == spacetime.SnapshotDurable && failed[e.ID]:
			continue
		}
		kept = append(kept, e)
	}
	return kept
}

// checkReplayMarked: a run that replays input marks batches as replayed
// (the golden drops the flag, whose batches are timing).
func checkReplayMarked(t *testing.T, events []spacetime.Event) {
	t.Helper()
	replays, marked := 0, 0
	for _, e := range events {
		switch {
		case e.Kind == spacetime.ReplayStart:
			replays++
		case e.Kind == spacetime.Batch && e.Replay:
			marked++
		}
	}
	if replays > 0 && marked == 0 {
		t.Fatalf("%d replay regions but no batch marked as replayed", replays)
	}
}

// TestUnalignedRunLabelsNoTaskAligned: in an unaligned run every task of
// every recovery point, the final one (taken without barriers) included,
// is labelled unaligned, and in an aligned run none is.
func TestUnalignedRunLabelsNoTaskAligned(t *testing.T) {
	for _, barriers := range []string{"aligned", "unaligned"} {
		sc := &scenario{job: "join", barriers: barrierSetting{barriers: barriers}, inputs: traceInputs("join", 40, 400),
			interval: 20 * time.Millisecond}
		o := sc.execute(t)
		if o.err != nil {
			t.Fatalf("%s: %v", sc, o.err)
		}
		o.check(t, sc.String())
		final := false
		for _, cp := range o.report.History {
			final = final || cp.Final
			for _, task := range cp.Tasks {
				if task.Unaligned != (barriers == "unaligned") {
					t.Errorf("%s: checkpoint %d (final %v): task %s labelled unaligned=%v", sc, cp.ID, cp.Final, task.Task, task.Unaligned)
				}
			}
		}
		if !final {
			t.Fatalf("%s: no final checkpoint in the history", sc)
		}
	}
}
