package runtest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/sink"
	"github.com/rewind-engine/rewind/reference"
)

// Reference is the executor every run is judged against: one thread, no
// failures, its output resolved as an executor's is. The suite reaches it
// only through this run.Executor value.
var Reference run.Executor = reference.Executor{}

// Want is the reference's answer for a run configuration.
type Want struct {
	Table     *sink.Table // its output, as sink.Resolve reads it
	LateRows  int64
	RecordsIn int64
}

var oracleCache sync.Map // config key -> *oracleEntry

// oracleEntry is one configuration's answer. Its lock makes parallel
// scenarios of one configuration wait for the first one's reference run
// instead of each running it; a run that failed leaves want nil, and the
// next caller runs it again.
type oracleEntry struct {
	mu   sync.Mutex
	want *Want
}

// Oracle returns the reference's answer for the job, parameters and inputs
// of cfg: Reference runs them, unpaced, into a fresh transactional CSV
// output on a RAM disk (how rows are delivered does not change what
// resolves), with a checked allocator that must end at zero. Many
// scenarios share a configuration and differ only in crashes, so answers
// are cached for the test binary.
func Oracle(t testing.TB, cfg run.Config) *Want {
	t.Helper()
	key := fmt.Sprintf("%s|%v|%v|%d", cfg.Job, cfg.Params, cfg.Inputs, cfg.Seed)
	e, _ := oracleCache.LoadOrStore(key, &oracleEntry{})
	entry := e.(*oracleEntry)
	entry.mu.Lock()
	defer entry.mu.Unlock()
	if entry.want != nil {
		return entry.want
	}
	ref := run.Config{Job: cfg.Job, Params: cfg.Params, Executor: Reference.Name(), Inputs: map[string]string{},
		Output: filepath.Join(FastDir(t, "rewind-ref-", false), "out"), OutputFormat: sink.CSV, SinkMode: sink.Transactional,
		Parallelism: 1, Seed: cfg.Seed}
	for n, spec := range cfg.Inputs {
		ref.Inputs[n] = unpaced(spec)
	}
	ctx := context.Background()
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	env, err := run.Prepare(ctx, ref, alloc, slog.New(slog.NewTextHandler(io.Discard, nil)), false, run.OutputRequireEmpty)
	if err != nil {
		t.Fatalf("reference: prepare: %v", err)
	}
	s, err := Reference.Run(ctx, env)
	if err == nil {
		err = run.Finish(env, s)
	}
	if cerr := env.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatalf("reference: %v", err)
	}
	alloc.AssertSize(t, 0)
	table, _, _ := ReadBack(t, env, false)
	w := &Want{Table: table, LateRows: s.LateRows, RecordsIn: s.RecordsIn}
	entry.want = w
	return w
}

// unpaced drops the rate option of a generator spec: the reference reads
// the same records, only without waiting for them.
func unpaced(spec string) string {
	i := strings.Index(spec, ",rate=")
	if i < 0 {
		return spec
	}
	rest := spec[i+len(",rate="):]
	if j := strings.IndexByte(rest, ','); j >= 0 {
		return spec[:i] + rest[j:]
	}
	return spec[:i]
}
