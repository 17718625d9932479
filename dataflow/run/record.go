package run

import (
	"path/filepath"
	"strings"
	"time"

	"github.com/rewind-engine/rewind/dataflow/runrecord"
)

// RecordOf is the run record of a run of cfg in storage storageURL (the
// open store's URL) reached at s3Endpoint (empty unless S3), started now.
// A --resume compares the record its output directory holds with the
// RecordOf its own configuration (runrecord.Record.Differences).
func RecordOf(cfg Config, storageURL, s3Endpoint string) runrecord.Record {
	return runrecord.Record{RunID: cfg.RunID, Executor: cfg.Executor, Job: cfg.Job, Params: cfg.Params,
		Inputs: absInputs(cfg.Inputs), SinkMode: string(cfg.SinkMode), OutputFormat: string(cfg.OutputFormat),
		Seed: cfg.Seed, Parallelism: cfg.Parallelism, Fixed: fixedOf(cfg),
		Storage: storageURL, S3Endpoint: s3Endpoint, Started: time.Now().UTC()}
}

// absInputs makes the path of every file: input absolute, so a resume
// started from another directory is compared by the files it would read.
func absInputs(in map[string]string) map[string]string {
	out := make(map[string]string, len(in))
	for name, spec := range in {
		if path, ok := strings.CutPrefix(spec, "file:"); ok && path != "" {
			if abs, err := filepath.Abs(path); err == nil {
				spec = "file:" + abs
			}
		}
		out[name] = spec
	}
	return out
}

// fixedOf is what cfg's executor options say a resume must keep.
func fixedOf(cfg Config) map[string]string {
	if cfg.Options == nil {
		return nil
	}
	return cfg.Options.Fixed(cfg)
}
