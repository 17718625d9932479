package checkpoint

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cockroachdb/datadriven"
)

// TestDataDriven runs the scripts in testdata/, one file per scenario
// family. Commands:
//
//	new tasks=a,b [max-concurrent=N] [timeout=D] [retained=N] [completed=3,5]
//	step
//	<one input per line, times in seconds after the start:
//	 trigger t=S, ack t=S cp=N task=T [state=B] [durable],
//	 parts-written t=S cp=N, metadata-written t=S cp=N,
//	 metadata-failed t=S cp=N err=TEXT, decline t=S cp=N task=T reason=TEXT,
//	 timeout t=S cp=N, task-failed t=S task=T, stop t=S>
//	status
//
// step prints each input and the actions it produced (indented); status
// prints the pending and retained checkpoints and the counters. Rewrite
// the expected output with -rewrite.
func TestDataDriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		var c *Coordinator
		datadriven.RunTest(t, path, func(t *testing.T, td *datadriven.TestData) string {
			switch td.Cmd {
			case "new":
				cfg, err := parseConfig(td)
				if err == nil {
					c, err = NewCoordinator(cfg)
				}
				if err != nil {
					td.Fatalf(t, "%v", err)
				}
				return fmt.Sprintf("tasks %v, max concurrent %d, timeout %v, retained %d\n",
					c.cfg.Tasks, c.cfg.MaxConcurrent, c.cfg.Timeout, c.cfg.Retained)
			case "step":
				var b strings.Builder
				for _, line := range strings.Split(strings.TrimSpace(td.Input), "\n") {
					in, err := parseInput(line)
					if err != nil {
						td.Fatalf(t, "%s: %v", line, err)
					}
					fmt.Fprintf(&b, "%v\n", in)
					for _, a := range c.Step(in) {
						fmt.Fprintf(&b, "  %v\n", a)
					}
				}
				return b.String()
			case "status":
				n := c.Counts()
				return fmt.Sprintf("pending %v, retained %v\ntriggered %d, completed %d, failed %d, aborted %d, skipped %d\n",
					c.Pending(), c.Completed(), n.Triggered, n.Completed, n.Failed, n.Aborted, n.Skipped)
			}
			td.Fatalf(t, "unknown command %q", td.Cmd)
			return ""
		})
	})
}

func parseConfig(td *datadriven.TestData) (Config, error) {
	var cfg Config
	for _, a := range td.CmdArgs {
		v := strings.Join(a.Vals, ",")
		list := strings.Split(v, ",")
		var err error
		switch a.Key {
		case "tasks":
			for _, s := range list {
				cfg.Tasks = append(cfg.Tasks, TaskID(s))
			}
		case "max-concurrent":
			cfg.MaxConcurrent, err = strconv.Atoi(v)
		case "retained":
			cfg.Retained, err = strconv.Atoi(v)
		case "timeout":
			cfg.Timeout, err = time.ParseDuration(v)
		case "completed":
			for _, s := range list {
				n, e := strconv.Atoi(s)
				err = errors.Join(err, e)
				cfg.Completed = append(cfg.Completed, ID(n))
			}
		default:
			err = fmt.Errorf("unknown argument %q", a.Key)
		}
		if err != nil {
			return cfg, err
		}
	}
	return cfg, nil
}

// parseInput reads one input line: a word, then key=value fields (values
// without spaces) or bare flags.
func parseInput(line string) (Input, error) {
	f := strings.Fields(line)
	if len(f) == 0 {
		return nil, errors.New("empty input")
	}
	args := map[string]string{}
	for _, kv := range f[1:] {
		k, v, _ := strings.Cut(kv, "=")
		args[k] = v
	}
	num := func(k string) int {
		n, _ := strconv.Atoi(args[k])
		return n
	}
	now := at(num("t"))
	id, task := ID(num("cp")), TaskID(args["task"])
	switch f[0] {
	case "trigger":
		return Trigger{now}, nil
	case "ack":
		_, durable := args["durable"]
		key := fmt.Sprintf("%d/%s", id, task)
		return Ack{now, id, task, Part{Key: key, StateBytes: int64(num("state")), Durable: durable}}, nil
	case "parts-written":
		return PartsWritten{now, id}, nil
	case "metadata-written":
		return MetadataWritten{now, id}, nil
	case "metadata-failed":
		return MetadataFailed{now, id, errors.New(args["err"])}, nil
	case "decline":
		return Decline{now, id, task, args["reason"]}, nil
	case "timeout":
		return Timeout{now, id}, nil
	case "task-failed":
		return TaskFailed{now, task}, nil
	case "stop":
		return Stop{now}, nil
	}
	return nil, fmt.Errorf("unknown input %q", f[0])
}

// TestStepFailsOnUnknownInput: a nil input is a bug in the loop; it comes
// out as Fail and changes nothing.
func TestStepFailsOnUnknownInput(t *testing.T) {
	c, err := NewCoordinator(Config{Tasks: []TaskID{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	as := c.Step(nil)
	if len(as) != 1 {
		t.Fatalf("got %v", as)
	}
	if f, ok := as[0].(Fail); !ok || !strings.Contains(f.Err.Error(), "does not take") {
		t.Fatalf("got %v", as)
	}
	if c.Counts() != (Counts{}) || len(c.Pending()) != 0 {
		t.Errorf("state changed: %+v %v", c.Counts(), c.Pending())
	}
}
