package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A sum past int64 fails the run, exit 1, naming the key and the job, in
// every executor and in the reference, which all run the shared operators;
// it once wrapped silently (3·2^62 read as -4611686018427387904).
func TestSumOverflowFailsTheRunInEveryExecutor(t *testing.T) {
	dir := t.TempDir()
	csv := filepath.Join(dir, "big.csv")
	// 2^62 three times for key 7, in one window.
	data := "id,key,value,ts\n0,7,4611686018427387904,1\n1,7,4611686018427387904,2\n2,7,4611686018427387904,3\n3,8,1,4\n"
	if err := os.WriteFile(csv, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, jobName := range []string{"keyed-count", "windowed-sum"} {
		for _, exec := range []string{"reference", "microbatch", "diskphase", "recordwise"} {
			args := append([]string{"run", "--job", jobName, "--executor", exec, "--input", "file:" + csv,
				"--output", filepath.Join(t.TempDir(), "o"), "--storage", "file://" + t.TempDir()}, quickSettings[exec]...)
			code, stdout, stderr := rewind(t, args...)
			if code != exitFailure || stdout != "" || !strings.Contains(stderr, "run of "+jobName+" failed") ||
				!strings.Contains(stderr, "key 7") || !strings.Contains(stderr, "outside the int64 range") {
				t.Errorf("%s on %s: exit %d, stdout %q, stderr %q; want exit 1 naming the job, key 7 and the int64 range", jobName, exec, code, stdout, stderr)
			}
		}
	}
}
