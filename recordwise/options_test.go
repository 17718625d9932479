package recordwise

import (
	"testing"
	"time"

	"github.com/rewind-engine/rewind/dataflow/run"
)

// The flags' options arrive in run.Config.Options; an Executor's own
// Options win field by field, and the barrier mode defaults to aligned.
func TestOptionsMergeFlagsUnderTheExecutors(t *testing.T) {
	cfg := run.Config{Options: Options{Barriers: barrierUnaligned, CheckpointInterval: time.Second, RetainedCheckpoints: 3}}
	got := Options{CheckpointInterval: 5 * time.Millisecond}.merged(cfg)
	if got.Barriers != barrierUnaligned || got.CheckpointInterval != 5*time.Millisecond || got.RetainedCheckpoints != 3 {
		t.Fatalf("merged %+v; want unaligned barriers and the retained checkpoints from the config, the interval from the executor", got)
	}
	if v := (Options{}).merged(run.Config{}).Variant(); v != barrierAligned {
		t.Fatalf("no barriers set: variant %q, want aligned", v)
	}
	if v := (Options{}).WithVariant(barrierUnaligned).Variant(); v != barrierUnaligned {
		t.Fatalf("WithVariant(unaligned): variant %q", v)
	}
	tr := Executor{}.Traits()
	if tr.Variants.Values[0] != barrierAligned || tr.Variants.Flag != "barriers" || tr.FirstDurablePoint != PointAfterMetadata {
		t.Fatalf("traits %+v", tr)
	}
}

// bench gives every contestant one cadence: for recordwise it is the
// checkpoint interval, and setting it keeps the barrier mode.
func TestWithCadenceSetsTheCheckpointInterval(t *testing.T) {
	o := Options{Barriers: barrierUnaligned, CheckpointInterval: time.Second}.WithCadence(250 * time.Millisecond)
	got := o.(Options)
	if o.Cadence() != 250*time.Millisecond || got.CheckpointInterval != 250*time.Millisecond || o.Variant() != barrierUnaligned {
		t.Fatalf("WithCadence(250ms): %+v, cadence %s; want the interval 250ms and unaligned barriers kept", got, o.Cadence())
	}
	if c := (Options{}).Cadence(); c != 0 {
		t.Fatalf("unset options: cadence %s, want 0", c)
	}
}
