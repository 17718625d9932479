package main

import (
	"bufio"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/runrecord"
	"github.com/rewind-engine/rewind/dataflow/sink"
	"github.com/rewind-engine/rewind/dataflow/storage"
)

// badInputTable is the bad-input table: one bad input per line, each with
// the exit code and the one error line the real binary gives for it.
// docs/reliability.md is rendered from it. Columns, tab-separated:
//
//	kind   what is wrong, in a few words (flags, executor flags, fail spec,
//	       input spec, input file, schema, storage, resume, output)
//	args   the command line after "rewind", words separated by single
//	       spaces; $DIR is a directory of fixture files (badInputFixtures),
//	       $OUT a fresh output directory, $ST a fresh storage directory,
//	       $PLAIN the host:port of a server that speaks plain HTTP
//	exit   the exit code: 2 for a usage error, 1 for a failed run
//	error  the last line of stderr, exactly, after the same substitutions;
//	       <*> stands for text that differs from run to run (ids, ports)
//
// Lines starting with # and blank lines are comments. The child gets no
// $REWIND_S3_ENDPOINT, so a missing endpoint is one of the inputs.
const badInputTable = "testdata/badinput.tsv"

type badInput struct {
	line       int
	kind, args string
	exit       int
	errorLine  string
}

func readBadInputs(t *testing.T) []badInput {
	t.Helper()
	f, err := os.Open(badInputTable)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []badInput
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		text := sc.Text()
		if strings.TrimSpace(text) == "" || strings.HasPrefix(text, "#") {
			continue
		}
		cols := strings.Split(text, "\t")
		if len(cols) != 4 {
			t.Fatalf("%s:%d: %d columns, want 4 (kind, args, exit, error)", badInputTable, n, len(cols))
		}
		code, err := strconv.Atoi(cols[2])
		if err != nil || code != exitUsage && code != exitFailure {
			t.Fatalf("%s:%d: exit %q, want 1 or 2", badInputTable, n, cols[2])
		}
		out = append(out, badInput{line: n, kind: cols[0], args: cols[1], exit: code, errorLine: cols[3]})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// badInputFixtures writes the files the table's rows name under $DIR.
func badInputFixtures(t *testing.T, dir string) {
	t.Helper()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("short.csv", "id,key,value,ts\n0,1,2,3\n1,2,3\n")
	write("header.csv", "id,key,val,ts\n0,1,2,3\n")
	write("notanumber.csv", "id,key,value,ts\n0,1,2,3\n1,2,x,4\n")
	write("overflow.csv", "id,key,value,ts\n0,7,4611686018427387904,1\n1,7,4611686018427387904,2\n2,7,4611686018427387904,3\n")
	write("garbage.parquet", "PAR1 this is not a Parquet file")
	write("afile", "x")
	for _, d := range []string{"empty", "nonempty"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write("nonempty/part-0.csv", "key,count,sum,_version\n")
	writeStringValueParquet(t, filepath.Join(dir, "stringvalue.parquet"))
	// A run record with one flipped byte.
	damaged := filepath.Join(dir, "damaged")
	if err := os.Mkdir(damaged, 0o755); err != nil {
		t.Fatal(err)
	}
	rec := run.RecordOf(run.Config{RunID: "r-1", Executor: "microbatch", Job: "keyed-count", Inputs: map[string]string{"in": "gen:records=10"},
		SinkMode: sink.Append, OutputFormat: sink.Parquet}, "file://"+dir, "")
	b, err := runrecord.Encode(rec)
	if err != nil {
		t.Fatal(err)
	}
	i := strings.Index(string(b), "records=10")
	b[i+3] ^= 0x01
	write("damaged/"+runrecord.FileName, string(b))
}

// writeStringValueParquet writes a Parquet file whose value column holds
// strings: a schema mismatch.
func writeStringValueParquet(t *testing.T, path string) {
	t.Helper()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "key", Type: arrow.PrimitiveTypes.Int64},
		{Name: "value", Type: arrow.BinaryTypes.String}, {Name: "ts", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	mem := memory.NewGoAllocator()
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	b.Field(0).(*array.Int64Builder).Append(0)
	b.Field(1).(*array.Int64Builder).Append(1)
	b.Field(2).(*array.StringBuilder).Append("ten")
	b.Field(3).(*array.Int64Builder).Append(0)
	rec := b.NewRecordBatch()
	defer rec.Release()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w, err := pqarrow.NewFileWriter(schema, f, nil, pqarrow.DefaultWriterProps())
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

// linePattern turns an expected error line into a regexp: literal text,
// with <*> matching anything.
func linePattern(line string) *regexp.Regexp {
	parts := strings.Split(line, "<*>")
	for i := range parts {
		parts[i] = regexp.QuoteMeta(parts[i])
	}
	return regexp.MustCompile("^" + strings.Join(parts, ".*") + "$")
}

// TestBadInputsGiveOneClearLine runs the real binary (this test binary
// re-executed as the CLI) on every row of the bad-input table and checks
// its exit code and its error line. Besides the error line, stderr may
// hold only the run id line a run prints when it starts. No row may panic
// or show a parser's raw text. REWIND_BADINPUT_PRINT=1 prints each row as
// the binary answers it, to write new rows.
func TestBadInputsGiveOneClearLine(t *testing.T) {
	rows := readBadInputs(t)
	if len(rows) < 40 {
		t.Fatalf("%s has %d rows; the table is meant to cover every kind of bad input", badInputTable, len(rows))
	}
	dir := t.TempDir()
	badInputFixtures(t, dir)
	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusForbidden) }))
	defer plain.Close()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, storage.EnvS3Endpoint+"=") {
			env = append(env, kv)
		}
	}
	env = append(env, cliChildEnv+"=1")
	print := os.Getenv("REWIND_BADINPUT_PRINT") == "1"
	var mu sync.Mutex
	sem := make(chan struct{}, 2)
	var wg sync.WaitGroup
	for _, r := range rows {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			n := fmt.Sprint(r.line)
			subst := strings.NewReplacer("$DIR", dir, "$OUT", filepath.Join(dir, "out-"+n), "$ST", filepath.Join(dir, "st-"+n),
				"$PLAIN", strings.TrimPrefix(plain.URL, "http://"))
			args := strings.Split(subst.Replace(r.args), " ")
			cmd := exec.Command(exe, args...)
			cmd.Dir = dir
			cmd.Env = env
			cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
			var stdout, stderr strings.Builder
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			_ = cmd.Run()
			code := cmd.ProcessState.ExitCode()
			lines := strings.Split(strings.TrimRight(stderr.String(), "\n"), "\n")
			last := lines[len(lines)-1]
			mu.Lock()
			defer mu.Unlock()
			if print {
				back := strings.NewReplacer(filepath.Join(dir, "out-"+n), "$OUT", filepath.Join(dir, "st-"+n), "$ST",
					strings.TrimPrefix(plain.URL, "http://"), "$PLAIN", dir, "$DIR")
				fmt.Printf("%s\t%s\t%d\t%s\n", r.kind, r.args, code, back.Replace(last))
			}
			where := fmt.Sprintf("%s:%d: rewind %s", badInputTable, r.line, r.args)
			if code != r.exit || !linePattern(subst.Replace(r.errorLine)).MatchString(last) {
				t.Errorf("%s:\n exit %d, error line %q\n want exit %d, %q", where, code, last, r.exit, subst.Replace(r.errorLine))
			}
			for _, l := range lines[:len(lines)-1] {
				if !runIDLine.MatchString(l) {
					t.Errorf("%s: stderr holds more than the error line: %q", where, stderr.String())
				}
			}
			if s := stderr.String(); strings.Contains(s, "panic") || strings.Contains(s, "strconv.") || strings.Contains(s, "internal error") {
				t.Errorf("%s: stderr shows a panic or a parser's raw text: %q", where, s)
			}
		}()
	}
	wg.Wait()
}
