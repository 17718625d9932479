//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/inspect"
	"github.com/rewind-engine/rewind/dataflow/job"
	"github.com/rewind-engine/rewind/dataflow/outdir"
	"github.com/rewind-engine/rewind/dataflow/report"
	"github.com/rewind-engine/rewind/dataflow/runrecord"
	"github.com/rewind-engine/rewind/dataflow/sink"
	"github.com/rewind-engine/rewind/dataflow/storage"
	"github.com/rewind-engine/rewind/dataflow/testseed"
)

// The strongest crash test: the whole `rewind run` process is SIGKILLed,
// as an operator's machine losing power would, then the same command is run
// again with --resume and the output must equal the reference executor's.
// Nothing of the first process survives but what it made durable: its
// storage and its output directory. The test binary re-executes itself as
// the CLI (cliChildEnv), so the child is the real command with its own
// flag parsing, signal handling and exit code.

// cliChildEnv makes TestMain run the CLI instead of the tests.
const cliChildEnv = "REWIND_TEST_RUN_CLI"

func TestMain(m *testing.M) {
	if os.Getenv(cliChildEnv) == "1" {
		main() // exits with the CLI's code
	}
	if os.Getenv(signalChildEnv) == "1" {
		signalChild() // never returns
	}
	os.Exit(m.Run())
}

// runIDLine is what every non-reference run prints on stderr at start: a
// new run names its id and how to resume it, a resumed one the id it
// continues.
var runIDLine = regexp.MustCompile(`(?m)^rewind: (?:run (\S+) \(if this process dies, resume with --resume (\S+)\)|resuming run (\S+) from )`)

// cliProcess is one `rewind` child process in its own process group.
type cliProcess struct {
	cmd     *exec.Cmd
	stdout  bytes.Buffer // read only after exited is closed
	stderr  *stderrWatch
	exited  chan struct{}
	state   *os.ProcessState
	started time.Time // just before the process was started
}

// stderrWatch keeps the child's stderr and signals the run id line.
type stderrWatch struct {
	mu       sync.Mutex
	buf      bytes.Buffer
	id       string
	resuming bool // the line says "resuming run"
	idSeen   chan struct{}
}

func (w *stderrWatch) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if w.id == "" {
		if m := runIDLine.FindSubmatch(w.buf.Bytes()); m != nil {
			w.id, w.resuming = string(m[1]), len(m[3]) > 0
			if w.resuming {
				w.id = string(m[3])
			} else if string(m[2]) != w.id {
				w.id = "(the line names two ids: " + string(m[0]) + ")"
			}
			close(w.idSeen)
		}
	}
	return len(p), nil
}

func (w *stderrWatch) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// startCLI starts the test binary as `rewind args...` in dir. The child
// gets its own process group, so kill reaches everything it started, and
// dies with the test binary (Pdeathsig) should the test time out.
func startCLI(t *testing.T, dir string, args ...string) *cliProcess {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := &cliProcess{stderr: &stderrWatch{idSeen: make(chan struct{})}, exited: make(chan struct{})}
	p.cmd = exec.Command(exe, args...)
	p.cmd.Dir = dir
	p.cmd.Env = append(os.Environ(), cliChildEnv+"=1")
	p.cmd.Stdout = &p.stdout
	p.cmd.Stderr = p.stderr
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p.started = time.Now()
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = p.cmd.Wait() // the exit status is in ProcessState
		p.state = p.cmd.ProcessState
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.kill()
		<-p.exited
	})
	return p
}

// kill SIGKILLs the child's whole process group.
func (p *cliProcess) kill() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
}

func (p *cliProcess) running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// wait waits for the child to end, at most limit.
func (p *cliProcess) wait(t *testing.T, limit time.Duration) {
	t.Helper()
	select {
	case <-p.exited:
	case <-time.After(limit):
		p.kill()
		<-p.exited
		t.Fatalf("rewind %s: still running after %s; killed. stderr:\n%s", strings.Join(p.cmd.Args[1:], " "), limit, p.stderr)
	}
}

// killedBySIGKILL says whether the ended child died of SIGKILL, and if
// not, how it ended.
func (p *cliProcess) killedBySIGKILL() (bool, string) {
	ws, ok := p.state.Sys().(syscall.WaitStatus)
	if ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL {
		return true, ""
	}
	return false, p.state.String()
}

// runID waits for the run id line on stderr and checks it says whether
// the process resumes a run.
func (p *cliProcess) runID(t *testing.T, resuming bool) string {
	t.Helper()
	select {
	case <-p.stderr.idSeen:
		if p.stderr.resuming != resuming {
			t.Fatalf("rewind %s: run id line %q; want resuming=%v", strings.Join(p.cmd.Args[1:], " "), p.stderr, resuming)
		}
		return p.stderr.id
	case <-p.exited:
		t.Fatalf("rewind %s ended (%s) without printing its run id; stderr:\n%s", strings.Join(p.cmd.Args[1:], " "), p.state, p.stderr)
	case <-time.After(30 * time.Second):
		t.Fatalf("rewind %s: no run id line after 30s; stderr:\n%s", strings.Join(p.cmd.Args[1:], " "), p.stderr)
	}
	return ""
}

// storageView is what one listing of a run's storage shows.
type storageView struct {
	objects          int // objects of the run, recovery points or not
	complete, points int
}

// viewStorage lists st and counts what belongs to run runID of executor
// exec, judged by the executor's own Inspector, as `rewind inspect` does.
func viewStorage(t *testing.T, st storage.Store, exec, runID string) storageView {
	t.Helper()
	objs, err := st.List(context.Background(), exec+"/")
	if err != nil {
		t.Fatal(err)
	}
	var v storageView
	for _, o := range objs {
		if rn, _, ok := inspect.SplitRunName(o.Name, exec); ok && strings.HasSuffix(rn, "/"+runID) {
			v.objects++
		}
	}
	for _, p := range executors[exec].(inspect.Inspector).RecoveryPoints(objs) {
		if !strings.HasSuffix(p.Run, "/"+runID) {
			continue
		}
		v.points++
		if p.Complete {
			v.complete++
		}
	}
	return v
}

// killPlan is when the first process dies.
type killPlan struct {
	// atStart: as soon as it has printed its run id, when storage
	// usually holds nothing of the run yet.
	atStart bool
	// early: while storage holds objects of the run but no complete
	// recovery point, so the resumed run starts from scratch under the
	// same id. Otherwise after the first complete recovery point and a
	// further wait: this fraction of the time left until killBy.
	early bool
	later float64
}

func (k killPlan) String() string {
	switch {
	case k.atStart:
		return "as soon as it printed its run id"
	case k.early:
		return "before the first complete recovery point"
	}
	return fmt.Sprintf("after the first complete recovery point and %.0f%% of the time left until %s", 100*k.later, killBy)
}

// resumedKillWithin bounds the kill of a resumed process, counted from
// when it printed its run id: below the paced input left after a first
// kill by killBy.
const resumedKillWithin = 400 * time.Millisecond

// killBy is the latest kill, counted from the start of the process. The
// paced inputs below are not all due until 2.5 s after the process opens
// them, so a process killed by then has surely not finished, however
// loaded the machine.
const killBy = 2 * time.Second

func drawKillPlan(r *rand.Rand) killPlan {
	switch r.IntN(6) {
	case 0:
		return killPlan{atStart: true}
	case 1:
		return killPlan{early: true}
	case 2:
		return killPlan{}
	}
	return killPlan{later: r.Float64()}
}

// killAt polls the child's storage and kills it as plan says (not an
// early plan: that kill is a fail point's). It returns the storage as a
// listing after the death shows it.
func killAt(t *testing.T, p *cliProcess, st storage.Store, exec, runID string, plan killPlan) storageView {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if !p.running() {
			t.Fatalf("the first process ended (%s) before the kill (%s): the inputs are too fast for the test; stderr:\n%s", p.state, plan, p.stderr)
		}
		if time.Now().After(deadline) {
			t.Fatalf("no complete recovery point after 30s; stderr:\n%s", p.stderr)
		}
		if plan.atStart {
			break
		}
		if v := viewStorage(t, st, exec, runID); v.complete > 0 {
			time.Sleep(time.Duration(plan.later * float64(killBy-time.Since(p.started))))
			break
		}
		time.Sleep(time.Millisecond)
	}
	p.kill()
	t.Logf("killed %s after the start", time.Since(p.started).Round(time.Millisecond))
	p.wait(t, 30*time.Second)
	if ok, how := p.killedBySIGKILL(); !ok {
		t.Fatalf("the first process was to die of SIGKILL %s, but it %s: the inputs are too fast for the test; stderr:\n%s", plan, how, p.stderr)
	}
	return viewStorage(t, st, exec, runID)
}

// killCase is one executor setting of the campaign.
type killCase struct {
	name, exec, job, mode, format string
	// params are the job's parameter flags; settings the executor's.
	params, settings []string
	// earlyPoint is a fail point reached after the run's first object is
	// durable and before its first recovery point is complete.
	earlyPoint string
	// processes runs the workers as processes (--workers process): every
	// one the killed coordinator started must be gone soon after it.
	processes bool
}

// killCases is a small matrix, chosen to cover every executor, every sink
// mode and both barrier modes while the file stays within its time budget.
var killCases = []killCase{
	{name: "microbatch-transactional", exec: "microbatch", job: "keyed-count", mode: "transactional", format: "parquet",
		earlyPoint: "batch.after-offsets"},
	{name: "microbatch-idempotent", exec: "microbatch", job: "windowed-sum", mode: "idempotent", format: "csv",
		params: []string{"--window", "200ms"}, earlyPoint: "batch.after-offsets"},
	{name: "recordwise-aligned-transactional", exec: "recordwise", job: "keyed-count", mode: "transactional", format: "parquet",
		settings: []string{"--checkpoint-interval", "200ms"}, earlyPoint: "checkpoint.after-parts-before-metadata"},
	{name: "recordwise-unaligned-append", exec: "recordwise", job: "keyed-count", mode: "append", format: "csv",
		settings: []string{"--barriers", "unaligned", "--checkpoint-interval", "200ms"}, earlyPoint: "checkpoint.after-parts-before-metadata"},
	{name: "diskphase-idempotent", exec: "diskphase", job: "windowed-sum", mode: "idempotent", format: "parquet",
		params: []string{"--window", "200ms"}, settings: []string{"--job-records", "4000"}, earlyPoint: "coordinator.after-plan"},
	// The coordinator of worker processes killed: they die with it, and
	// --resume starts new ones.
	{name: "microbatch-append-processes", exec: "microbatch", job: "keyed-count", mode: "append", format: "csv",
		earlyPoint: "batch.after-offsets", processes: true},
	{name: "recordwise-aligned-idempotent-processes", exec: "recordwise", job: "keyed-count", mode: "idempotent", format: "parquet",
		settings: []string{"--checkpoint-interval", "200ms"}, earlyPoint: "checkpoint.after-parts-before-metadata", processes: true},
	{name: "diskphase-transactional-processes", exec: "diskphase", job: "keyed-count", mode: "transactional", format: "csv",
		settings: []string{"--job-records", "4000"}, earlyPoint: "coordinator.after-plan", processes: true},
}

// noOrphans fails unless every worker process that p, a coordinator
// that has exited or been killed, started (its -v log) is gone within a
// few seconds. A coordinator killed as soon as it printed its run id may
// have started none yet; the finished run's always has.
func (c killCase) noOrphans(t *testing.T, p *cliProcess) {
	t.Helper()
	if !c.processes {
		return
	}
	started := workerStarted.FindAllStringSubmatch(p.stderr.String(), -1)
	t.Logf("%d worker processes of that coordinator to check", len(started))
	deadline := time.Now().Add(5 * time.Second)
	for _, m := range started {
		for {
			if _, err := os.Stat("/proc/" + m[3]); err != nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("worker %s (pid %s) outlived its killed coordinator by 5 s", m[1], m[3])
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// pacedInput lasts 2.5 s at its rate, whatever the machine's speed: the
// first process is surely still running when it is killed. Each key has
// about four records, so a row lost from the output before the recovery
// point is rarely replaced by a later update of its key: the comparison
// with the reference sees it.
func pacedInput(seed int) string { return genInput(seed, 8000) }

// genInput is the tests' input of 20000 records, paced at rate records a
// second (0: not paced, as the reference reads it).
func genInput(seed, rate int) string {
	if rate == 0 {
		return fmt.Sprintf("gen:records=20000,keys=5000,partitions=2,seed=%d", seed)
	}
	return fmt.Sprintf("gen:records=20000,keys=5000,partitions=2,rate=%d,seed=%d", rate, seed)
}

// TestKilledProcessResumesToTheReference SIGKILLs `rewind run` at a seeded
// moment (before its first complete recovery point, at it, or some time
// after), sometimes kills the resumed process too, and runs the same command
// with --resume to the end: the resolved output must equal the reference
// executor's, with no duplicate rows where the sink mode promises none.
func TestKilledProcessResumesToTheReference(t *testing.T) {
	seed := testseed.Seed(t)
	for i, c := range killCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.killAndResume(t, rand.New(rand.NewPCG(seed, uint64(i))))
		})
	}
}

func (c killCase) killAndResume(t *testing.T, r *rand.Rand) {
	dataSeed := 1 + r.IntN(1000)
	plan := drawKillPlan(r)
	killResumed := r.IntN(4) == 0
	bareResume := r.IntN(2) == 0
	t.Logf("input seed %d; first process killed %s; resumed process killed too: %v; bare --resume: %v", dataSeed, plan, killResumed, bareResume)

	dir := t.TempDir()
	storeURL := "file://" + filepath.Join(dir, "store")
	out := filepath.Join(dir, "out")
	args := append([]string{"run", "--executor", c.exec, "--job", c.job, "--sink-mode", c.mode, "--output-format", c.format,
		"--input", pacedInput(dataSeed), "--output", out, "--storage", storeURL, "--summary", "json"}, c.params...)
	args = append(args, c.settings...)
	if c.processes {
		args = append(args, "--workers", "process", "-v")
	}
	st, err := storage.Open(context.Background(), storeURL, storage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var id string
	var atKill storageView
	if plan.early {
		// The window between a run's first object and its first complete
		// recovery point is milliseconds wide, too narrow to hit by
		// polling on a loaded machine: the process kills itself (SIGKILL)
		// at the first point inside it.
		first := startCLI(t, dir, append(slices.Clone(args), "--fail", "point="+c.earlyPoint+",occurrence=1,kill=process")...)
		id = first.runID(t, false)
		first.wait(t, 30*time.Second)
		if ok, how := first.killedBySIGKILL(); !ok {
			t.Fatalf("the first process was to die of SIGKILL at %s, but it %s; stderr:\n%s", c.earlyPoint, how, first.stderr)
		}
		c.noOrphans(t, first)
		atKill = viewStorage(t, st, c.exec, id)
		if atKill.objects == 0 || atKill.complete > 0 {
			t.Fatalf("killed at %s: storage held %d objects of run %s and %d complete recovery points; want some objects and no complete point",
				c.earlyPoint, atKill.objects, id, atKill.complete)
		}
	} else {
		first := startCLI(t, dir, args...)
		id = first.runID(t, false)
		atKill = killAt(t, first, st, c.exec, id, plan)
		c.noOrphans(t, first)
	}
	st.Close()
	t.Logf("killed: storage held %d objects of run %s, %d of %d recovery points complete", atKill.objects, id, atKill.complete, atKill.points)

	resume := "--resume=" + id
	if bareResume {
		resume = "--resume" // the run recorded in --output
	}
	if killResumed {
		second := startCLI(t, dir, append(args, resume)...)
		if got := second.runID(t, true); got != id {
			t.Fatalf("the resumed process runs %s, want %s", got, id)
		}
		// The first process died by killBy, so at least 0.5 s of paced
		// input is left, and the resumed process paces from its restored
		// position: killed within resumedKillWithin of printing its run id,
		// it has surely not finished. (Up to killBy, it sometimes had: the
		// kill landed after the run was recorded finished, and the last
		// --resume was refused.)
		time.Sleep(time.Duration(r.Float64() * float64(resumedKillWithin)))
		second.kill()
		second.wait(t, 30*time.Second)
		if ok, how := second.killedBySIGKILL(); !ok {
			t.Fatalf("the resumed process was to die of SIGKILL, but it %s; stderr:\n%s", how, second.stderr)
		}
		c.noOrphans(t, second)
	}
	c.resumeToTheReference(t, dir, append(args, resume), id, out, dataSeed)
}

// resumeToTheReference runs args, a --resume of run id writing out, to the
// end and checks its summary and output: the earlier death billed as a
// crash, the output equal to the reference executor's on genInput(dataSeed),
// no duplicate or conflicting rows where the sink mode promises none.
func (c killCase) resumeToTheReference(t *testing.T, dir string, args []string, id, out string, dataSeed int) {
	t.Helper()
	last := startCLI(t, dir, args...)
	if got := last.runID(t, true); got != id {
		t.Fatalf("the resumed process runs %s, want %s", got, id)
	}
	last.wait(t, 2*time.Minute)
	if code := last.state.ExitCode(); code != 0 {
		t.Fatalf("resumed run: exit %d; stderr:\n%s", code, last.stderr)
	}
	if c.processes && len(workerStarted.FindAllString(last.stderr.String(), -1)) < 2 {
		t.Fatalf("resumed run with --workers process started fewer than 2 worker processes; stderr:\n%s", last.stderr)
	}
	c.noOrphans(t, last)
	var s map[string]any
	if err := json.Unmarshal([]byte(lastLine(last.stdout.String())), &s); err != nil {
		t.Fatalf("resumed run: the last stdout line is not the JSON summary: %v\n%s", err, last.stdout.String())
	}
	if s["run_id"] != id || s["resumed"] != true {
		t.Errorf("resumed run: summary run_id %v resumed %v, want %s and true", s["run_id"], s["resumed"], id)
	}
	// The earlier process's death is billed as a crash: the first recovery,
	// with a restore time only; resumed_from names the point restored.
	crashes, _ := s["crashes"].(float64)
	recs, _ := s["recoveries"].([]any)
	var first map[string]any
	if len(recs) > 0 {
		first, _ = recs[0].(map[string]any)
	}
	if crashes < 1 || first == nil || first["cause"] != report.CauseProcessDied || first["detect_ms"] != nil || first["restore_ms"] == nil {
		t.Errorf("resumed run: crashes %v, recoveries %v; want the earlier process's death first, cause %q, no detect_ms, a restore_ms",
			s["crashes"], s["recoveries"], report.CauseProcessDied)
	}
	kind := map[string]string{"microbatch": "batch", "recordwise": "checkpoint", "diskphase": "finite job"}[c.exec]
	rf, _ := s["resumed_from"].(map[string]any)
	if rf == nil || rf["kind"] != kind {
		t.Errorf("resumed run: resumed_from %v, want a %s", s["resumed_from"], kind)
	} else if before, _ := rf["records_before"].(float64); crashes == 1 && s["records_in"].(float64)+before != 20000 {
		t.Errorf("resumed run: records_in %v + resumed_from.records_before %v, want the input once, 20000", s["records_in"], before)
	}

	j, err := job.Build(c.job, job.DefaultParams)
	if err != nil {
		t.Fatal(err)
	}
	got, stats, err := sink.Resolve(out, j.Output)
	if err != nil {
		t.Fatal(err)
	}
	// The rate only paces the generator; the reference need not wait.
	want := referenceOutput(t, j, append([]string{"--input", genInput(dataSeed, 0)}, c.params...))
	if d := got.Diff(want, 5); d != "" {
		t.Errorf("after the kill and --resume the output differs from the reference (%d rows):\n%s", len(want.Rows), d)
	}
	if s["sink_duplicate_rows"] != float64(stats.DuplicateRows) {
		t.Errorf("summary says %v duplicate rows, the directory holds %d", s["sink_duplicate_rows"], stats.DuplicateRows)
	}
	if c.mode != "append" && (stats.DuplicateRows != 0 || stats.ConflictingRows != 0) {
		t.Errorf("%s sink: %d duplicate and %d conflicting rows after the kill", c.mode, stats.DuplicateRows, stats.ConflictingRows)
	}
	// What a dead process was writing is its resumer's to clear (the sink's
	// Open does it).
	if left := hiddenTemporaries(t, out); len(left) > 0 {
		t.Errorf("%s sink: the finished run left temporary files in its output: %v", c.mode, left)
	}
	t.Logf("resumed summary: records_in %v, rows_out %v, crashes %v, recoveries %v, resumed_from %v, duplicates %d, conflicting %d",
		s["records_in"], s["rows_out"], s["crashes"], s["recoveries"], s["resumed_from"], stats.DuplicateRows, stats.ConflictingRows)
}

// The kills above land at moments a poll of storage can see. The kills
// below land at exact protocol steps: the first process runs with --fail
// point=NAME,occurrence=K,kill=process and SIGKILLs itself there, then
// --resume runs it to the end. The end of a run (the last commit, the
// sink's Finish, the run record marked finished) is reached only this way.

// pointKillExec is an executor setting of the point kills.
type pointKillExec struct {
	killCase
	// paced: the input is paced over half a second (pointKillRate), and
	// the setting's recovery points are small enough that every point
	// below is reached at least its maxOccurrence times. Otherwise the
	// input is not paced and the run has one recovery point or batch,
	// the last: occurrence 1 is the end of the run.
	paced bool
}

var pointKillExecs = []pointKillExec{
	{killCase{name: "microbatch", exec: "microbatch", job: "keyed-count", settings: []string{"--max-batch-records", "4000"}}, true},
	{killCase{name: "microbatch-one-batch", exec: "microbatch", job: "windowed-sum", params: []string{"--window", "200ms"}}, false},
	{killCase{name: "recordwise-aligned", exec: "recordwise", job: "keyed-count", settings: []string{"--checkpoint-interval", "100ms"}}, true},
	{killCase{name: "recordwise-unaligned", exec: "recordwise", job: "windowed-sum", params: []string{"--window", "200ms"},
		settings: []string{"--barriers", "unaligned", "--checkpoint-interval", "100ms"}}, true},
	{killCase{name: "recordwise-final-checkpoint-only", exec: "recordwise", job: "keyed-count", settings: []string{"--checkpoint-interval", "1h"}}, false},
	{killCase{name: "diskphase", exec: "diskphase", job: "windowed-sum", params: []string{"--window", "200ms"},
		settings: []string{"--job-records", "4000"}}, true},
	{killCase{name: "diskphase-one-job", exec: "diskphase", job: "keyed-count"}, false},
}

const pointKillRate = 40000

// execPoint is an executor's point and the highest occurrence a paced
// case may ask for: one every such run reaches. Recordwise's are counted in
// checkpoints, which the time a slow machine takes can make fewer, so they
// stay at 2: the final checkpoint and one periodic one.
type execPoint struct {
	name          string
	maxOccurrence int
}

// pointKillPoints are the executor points the cases kill at: where a
// recovery point or batch becomes durable, and the steps between a
// transactional sink's pre-commit and its commit.
var pointKillPoints = map[string][]execPoint{
	"microbatch": {{"batch.after-sink", 4}, {"batch.commit-mid-write", 4}, {"batch.after-commit", 4}},
	"recordwise": {{"checkpoint.after-metadata", 2}, {"sink.after-precommit", 2}, {"sink.before-commit", 2}, {"sink.after-commit", 2}},
	"diskphase":  {{"job.before-commit", 5}, {"job.mid-commit", 5}, {"job.after-commit", 5}},
}

// pointKill is one case: an executor setting with its sink mode and
// format, and the --fail of each process that dies, the first process and
// then resumed ones, before a last --resume runs to the end.
type pointKill struct {
	pointKillExec
	fails []string
}

func (p pointKill) String() string {
	points := make([]string, len(p.fails))
	for i, f := range p.fails {
		points[i] = strings.TrimSuffix(strings.ReplaceAll(strings.TrimPrefix(f, "point="), ",occurrence=", "-"), ",kill=process")
	}
	return fmt.Sprintf("%s-%s-%s-%s", p.name, p.mode, p.format, strings.Join(points, "-then-"))
}

func processKill(point string, occurrence int) string {
	return fmt.Sprintf("point=%s,occurrence=%d,kill=process", point, occurrence)
}

// drawPointKills picks the cases of one test run: one per executor
// setting, with a drawn sink mode and format, every other one (from a
// drawn start) at an end-of-run point and the rest at an executor point;
// one case in three kills the resumed process too, at an end-of-run point
// (which every resumed process reaches, whatever is left to do). With
// all, every point and sink mode of every setting, killed once.
func drawPointKills(r *rand.Rand, all bool) []pointKill {
	modes := []string{"append", "idempotent", "transactional"}
	formats := []string{"parquet", "csv"}
	var out []pointKill
	add := func(e pointKillExec, p execPoint, mode string) {
		e.mode, e.format = mode, formats[r.IntN(2)]
		occ := 1
		if e.paced {
			occ += r.IntN(p.maxOccurrence)
		}
		k := pointKill{e, []string{processKill(p.name, occ)}}
		if !all && r.IntN(3) == 0 {
			k.fails = append(k.fails, processKill(fault.RunPoints[r.IntN(len(fault.RunPoints))], 1))
		}
		out = append(out, k)
	}
	var end []execPoint
	for _, p := range fault.RunPoints {
		end = append(end, execPoint{p, 1})
	}
	off := r.IntN(2)
	for i, e := range pointKillExecs {
		own := pointKillPoints[e.exec]
		switch {
		case all:
			for _, p := range append(slices.Clone(end), own...) {
				for _, m := range modes {
					add(e, p, m)
				}
			}
		case (i+off)%2 == 0:
			add(e, end[r.IntN(len(end))], modes[r.IntN(3)])
		default:
			add(e, own[r.IntN(len(own))], modes[r.IntN(3)])
		}
	}
	return out
}

// TestProcessKilledAtAPointResumesToTheReference: the first process kills
// itself at a named point (--fail ...,kill=process), at the end of the run
// or at a step of the executor's protocol, and --resume runs the job to the
// end: the output must equal the reference's, with no duplicate or
// conflicting rows for idempotent and transactional sinks. A seeded draw
// of one case per executor setting; REWIND_KILL_ALL_POINTS=1 runs them all.
func TestProcessKilledAtAPointResumesToTheReference(t *testing.T) {
	seed := testseed.Seed(t)
	t.Logf("seed %d (replay with REWIND_TEST_SEED=%d)", seed, seed)
	r := rand.New(rand.NewPCG(seed, 0))
	for i, c := range drawPointKills(r, os.Getenv("REWIND_KILL_ALL_POINTS") == "1") {
		dataSeed := 1 + r.IntN(1000)
		t.Run(fmt.Sprintf("%02d-%s", i, c), func(t *testing.T) {
			t.Parallel()
			c.killAtPointAndResume(t, dataSeed)
		})
	}
}

func (c pointKill) killAtPointAndResume(t *testing.T, dataSeed int) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	args := append([]string{"run", "--executor", c.exec, "--job", c.job, "--sink-mode", c.mode, "--output-format", c.format,
		"--input", genInput(dataSeed, map[bool]int{true: pointKillRate}[c.paced]), "--output", out, "--storage", "file://" + filepath.Join(dir, "store"),
		"--summary", "json"}, c.params...)
	args = append(args, c.settings...)
	t.Logf("input seed %d; processes killed by --fail %s", dataSeed, strings.Join(c.fails, ", then "))
	var id string
	for i, fail := range c.fails {
		pargs := slices.Clone(args)
		if i > 0 {
			pargs = append(pargs, "--resume")
		}
		p := startCLI(t, dir, append(pargs, "--fail", fail)...)
		if got := p.runID(t, i > 0); i == 0 {
			id = got
		} else if got != id {
			t.Fatalf("the resumed process runs %s, want %s", got, id)
		}
		p.wait(t, time.Minute)
		if ok, how := p.killedBySIGKILL(); !ok {
			t.Fatalf("process %d was to kill itself at %s, but it %s; stderr:\n%s", i+1, fail, how, p.stderr)
		}
		if p.stdout.Len() != 0 {
			t.Errorf("process %d, killed, printed a summary: %q", i+1, p.stdout.String())
		}
		rec, err := runrecord.Read(out)
		if err != nil || rec.RunID != id || rec.Finished != nil {
			t.Fatalf("after the kill of process %d the run record is %+v, %v; want run %s, not finished", i+1, rec, err, id)
		}
	}
	c.resumeToTheReference(t, dir, append(args, "--resume"), id, out, dataSeed)
}

// hiddenTemporaries lists the files under dir a sink writes before it
// publishes them (".tmp-" names).
func hiddenTemporaries(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), ".tmp-") {
			out = append(out, strings.TrimPrefix(path, dir+"/"))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestResumeRefusals: --resume refuses, with exit 2 and one line naming
// the flag, whatever cannot continue the recorded run, and leaves its
// output as it was.
func TestResumeRefusals(t *testing.T) {
	dir := t.TempDir()
	out, store := filepath.Join(dir, "out"), "file://"+filepath.Join(dir, "store")
	base := []string{"run", "--executor", "microbatch", "--job", "windowed-sum", "--window", "100ms", "--sink-mode", "append",
		"--input", "gen:records=2000,keys=40,seed=5", "--output", out, "--storage", store}
	code, _, stderr := rewind(t, base...)
	if code != 0 {
		t.Fatalf("the recorded run: exit %d: %s", code, stderr)
	}
	m := runIDLine.FindStringSubmatch(stderr)
	if m == nil || m[1] == "" {
		t.Fatalf("no run id line on stderr: %q", stderr)
	}
	id := m[1]
	j, err := job.Build("windowed-sum", job.DefaultParams)
	if err != nil {
		t.Fatal(err)
	}
	before, _, err := sink.Resolve(out, j.Output)
	if err != nil {
		t.Fatal(err)
	}
	// with replaces the value of flag in base, or adds the flag.
	with := func(flag, value string) []string {
		args := slices.Clone(base)
		if i := slices.Index(args, flag); i >= 0 {
			args[i+1] = value
			return args
		}
		return append(args, flag, value)
	}
	cases := []struct {
		args   []string
		phrase string
	}{
		{append(with("--output", filepath.Join(dir, "elsewhere")), "--resume"), "holds no run record"},
		{append(slices.Clone(base), "--resume=someone-else"), "holds the output of run " + id},
		{append(slices.Clone(base), "--resume=../x"), "--resume \"../x\""},
		{append(slices.Clone(base), "--resume="+id, "--overwrite"), "--overwrite"},
		{append(with("--executor", "reference"), "--resume="+id), "--executor"},
		{append(with("--input", "push:listen=127.0.0.1:0"), "--resume="+id), "push"},
		{append(with("--executor", "recordwise"), "--resume="+id), "--executor was \"microbatch\""},
		{append(with("--job", "keyed-count"), "--resume="+id), "--job was"},
		{append(with("--input", "gen:records=2000,keys=40,seed=6"), "--resume="+id), "--input was"},
		{append(with("--window", "200ms"), "--resume="+id), "--window was"},
		{append(with("--sink-mode", "idempotent"), "--resume="+id), "--sink-mode was"},
		{append(with("--output-format", "csv"), "--resume="+id), "--output-format was"},
		{append(with("--storage", filepath.Join(dir, "other")), "--resume"), "--storage was"},
		{append(with("--seed", "9"), "--resume"), "--seed was \"1\", now \"9\""},
		{append(slices.Clone(base), "--resume="), "invalid --resume=: give a run id"},
	}
	for _, c := range cases {
		code, _, stderr := rewind(t, c.args...)
		lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
		if code != exitUsage || len(lines) != 1 || !strings.Contains(stderr, c.phrase) {
			t.Errorf("rewind %s: exit %d, stderr %q; want exit 2 and one line containing %q", strings.Join(c.args[1:], " "), code, stderr, c.phrase)
		}
	}
	// A process still writing the directory (here: this one, holding its
	// lock) keeps a resume out.
	unlock, err := outdir.Lock(out)
	if err != nil {
		t.Fatal(err)
	}
	code, _, stderr = rewind(t, append(slices.Clone(base), "--resume")...)
	unlock()
	if code != exitUsage || !strings.Contains(stderr, "in use by another rewind process") {
		t.Errorf("resume while the directory is locked: exit %d, stderr %q; want exit 2, in use", code, stderr)
	}
	// Every form names the run, and the run finished: nothing to resume,
	// rather than a bill for a death that never happened.
	for _, resume := range [][]string{{"--resume", id}, {"--resume=" + id}, {"--resume"}} {
		code, stdout, stderr := rewind(t, append(slices.Clone(base), append(resume, "--summary", "json")...)...)
		want := "invalid --resume " + id + ": the run finished at "
		if code != exitUsage || stdout != "" || !strings.Contains(stderr, want) || strings.Count(stderr, "\n") != 1 {
			t.Errorf("rewind %s: exit %d, stdout %q, stderr %q; want exit 2 and one line containing %q", strings.Join(resume, " "), code, stdout, stderr, want)
		}
	}
	after, _, err := sink.Resolve(out, j.Output)
	if err != nil {
		t.Fatal(err)
	}
	if d := after.Diff(before, 5); d != "" {
		t.Errorf("the refused and finished resumes changed the output:\n%s", d)
	}
}
