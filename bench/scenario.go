package bench

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/job"
)

// The scenario's defaults. The rate leaves every default contestant
// headroom on a 2-core machine (capacities measured unpaced, see the
// README), so a crash is followed by a catch-up that ends; the modelled
// delays are those of a cluster manager with a short heartbeat timeout.
const (
	DefaultDuration     = 10 * time.Second
	DefaultWarmup       = time.Second
	DefaultCadence      = time.Second
	DefaultRate         = 150_000
	DefaultDetectDelay  = 500 * time.Millisecond
	DefaultAcquireDelay = 250 * time.Millisecond
	// DefaultFaultCadences is how many cadences after the warmup the
	// default fault comes: two and a half, so at least two recovery points
	// have completed after the warmup and the jitter of one cadence keeps
	// the fault clear of the end of the input.
	DefaultFaultCadences = 2.5
)

// Faults says which crash every run of every contestant gets.
type Faults struct {
	// None: no crash, the steady state only.
	None bool
	// Specs are worker kills, the same for every contestant. A kill at a
	// moment (At) is shifted by each repeat's jitter; one after a count
	// of records is not. Empty (and not None): DefaultFault.
	Specs []fault.Spec
}

// DefaultFault is the crash bench gives when none is asked for: worker 0
// killed DefaultFaultCadences cadences after the warmup.
func DefaultFault(warmup, cadence time.Duration) fault.Spec {
	at := warmup + time.Duration(DefaultFaultCadences*float64(cadence))
	return fault.Spec{Worker: 0, At: at.Round(time.Millisecond)}
}

// GenInputs are the live inputs of the scenario: generated, paced by the
// wall clock at rate records/s (summed over the inputs) for d, so input
// keeps arriving while a contestant is down. Each has one partition per
// worker (parallelism): a worker reads one, and diskphase's finite jobs,
// whose map units each read for one job interval, run in one wave, so a
// job covers one interval of input (with more partitions than workers
// the units run in waves and a job covers several). The join's two
// inputs share the rate and have more keys, so its output stays
// proportionate.
func GenInputs(jobName string, seed int64, rate float64, d time.Duration, parallelism int) map[string]string {
	parts := min(max(parallelism, 1), 64)
	spec := func(rate float64, keys int, seed int64) string {
		r := max(int64(rate), 1)
		n := max(int64(rate*d.Seconds()), 1)
		return fmt.Sprintf("gen:records=%d,keys=%d,partitions=%d,rate=%d,seed=%d", n, keys, parts, r, seed)
	}
	if jobName == "join" {
		return map[string]string{
			job.InputOrders:   spec(rate/2, 100_000, seed),
			job.InputPayments: spec(rate/2, 100_000, seed+1),
		}
	}
	return map[string]string{job.DefaultInput: spec(rate, 1000, seed)}
}

// unpaced is a gen: spec without its rate: the same records, as fast as
// they can be read. The reference reads its input so; it is what every
// contestant's output is compared with, and needs no pace to be right.
func unpaced(spec string) string {
	body, ok := strings.CutPrefix(spec, "gen:")
	if !ok {
		return spec
	}
	var keep []string
	for _, p := range strings.Split(body, ",") {
		if !strings.HasPrefix(p, "rate=") {
			keep = append(keep, p)
		}
	}
	return "gen:" + strings.Join(keep, ",")
}

// jitter is repeat r's fault offset as a fraction of one cadence, in
// [0, 1): stratified, so N repeats fall one in each N-th of the cycle,
// and within its stratum drawn from seed, so a benchmark with the same
// seed replays the same fault moments.
func jitter(seed int64, r, n int) float64 {
	if n < 1 {
		n = 1
	}
	u := rand.New(rand.NewPCG(uint64(seed), uint64(r))).Float64()
	return (float64(r%n) + u) / float64(n)
}

// shifted are specs with every timed kill moved offset later.
func shifted(specs []fault.Spec, offset time.Duration) []fault.Spec {
	out := append([]fault.Spec(nil), specs...)
	for i := range out {
		if out[i].At > 0 {
			out[i].At = (out[i].At + offset).Round(time.Millisecond)
		}
	}
	return out
}

// firstAt is the earliest timed kill of specs (nil: none is timed).
func firstAt(specs []fault.Spec) *time.Duration {
	var at *time.Duration
	for _, s := range specs {
		if s.At > 0 && (at == nil || s.At < *at) {
			d := s.At
			at = &d
		}
	}
	return at
}

func specsText(specs []fault.Spec) string {
	out := make([]string, len(specs))
	for i, s := range specs {
		out[i] = s.String()
	}
	return strings.Join(out, " ")
}

func msOf(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
