package runtest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/oracle"
	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/source"
)

var oracleCache sync.Map // config key -> *oracle.Result

// Oracle returns the oracle's answer for the job, parameters and inputs of
// cfg. Many scenarios share a configuration and differ only in crashes, so
// answers are cached for the test binary.
func Oracle(t testing.TB, cfg run.Config) *oracle.Result {
	t.Helper()
	key := fmt.Sprintf("%s|%v|%v|%d", cfg.Job, cfg.Params, cfg.Inputs, cfg.Seed)
	if r, ok := oracleCache.Load(key); ok {
		return r.(*oracle.Result)
	}
	j, err := job.Build(cfg.Job, cfg.Params)
	if err != nil {
		t.Fatal(err)
	}
	srcs := map[string]source.Source{}
	for n, spec := range cfg.Inputs {
		s, err := source.Open(unpaced(spec), source.Options{DefaultSeed: cfg.Seed})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		srcs[n] = s
	}
	res, err := oracle.Evaluate(context.Background(), j, srcs, memory.NewGoAllocator())
	if err != nil {
		t.Fatalf("oracle: %v", err)
	}
	oracleCache.Store(key, res)
	return res
}

// unpaced drops the rate option of a generator spec: the oracle reads the
// same records, only without waiting for them.
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
