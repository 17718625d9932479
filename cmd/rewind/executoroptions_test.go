package main

import (
	"reflect"
	"testing"

	"github.com/spf13/pflag"
)

// TestExecutorFlagsReachTheirOptions: every flag an executor declares
// (run.Traits.Flags) is one rewind run has, and setting it changes the
// Options the executor is handed; an executor that declares none gets no
// options.
func TestExecutorFlagsReachTheirOptions(t *testing.T) {
	parse := func(args ...string) (*runFlags, *pflag.FlagSet) {
		f := &runFlags{}
		fl := newRunCmd(nil, nil).Flags() // the flags rewind run has
		bound := pflag.NewFlagSet("run", pflag.ContinueOnError)
		f.addJobFlags(bound)
		bound.StringVar(&f.barriers, "barriers", fl.Lookup("barriers").DefValue, "")
		if err := bound.Parse(args); err != nil {
			t.Fatal(err)
		}
		return f, fl
	}
	others := map[string]string{"barriers": "unaligned", "lost-piece-recovery": "rerun-batch"}
	// Flags an executor takes that set run.Config, the same for all of
	// them, not its Options (TestRunModelledReplacement follows them).
	inConfig := map[string]bool{"detect-delay": true, "acquire-delay": true}
	for _, exec := range registry {
		flags := exec.Traits().Flags
		f, fl := parse()
		base := f.options(exec)
		if len(flags) == 0 && base != nil {
			t.Errorf("%s declares no flags but gets options %+v", exec.Name(), base)
		}
		for _, name := range flags {
			if inConfig[name] {
				continue
			}
			flag := fl.Lookup(name)
			if flag == nil {
				t.Errorf("%s declares --%s, which rewind run does not have", exec.Name(), name)
				continue
			}
			value := map[string]string{"duration": "7ms", "int": "7", "int64": "7"}[flag.Value.Type()]
			if v, ok := others[name]; ok {
				value = v
			}
			set, _ := parse("--"+name, value)
			if got := set.options(exec); reflect.DeepEqual(got, base) {
				t.Errorf("%s: --%s %s left its options at %+v", exec.Name(), name, value, got)
			}
		}
	}
}
