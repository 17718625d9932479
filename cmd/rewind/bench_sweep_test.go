package main

import (
	"errors"
	"strings"
	"testing"
)

func TestParseSweepFlag(t *testing.T) {
	sw, err := parseSweepFlag("", nil)
	if err != nil || sw.name != "" {
		t.Fatalf("no --sweep: %+v, %v", sw, err)
	}
	sw, err = parseSweepFlag("parallelism=2,4", []int{1})
	if err != nil || sw.name != "parallelism" || len(sw.points) != 2 {
		t.Fatalf("parallelism=2,4 killing worker 1: %+v, %v", sw, err)
	}
	for text, want := range map[string]string{
		"parallelism=1,4": "kills worker 1, which parallelism 1 does not have",
		"load=120%":       "below 100%",
		"speed=1":         "unknown setting",
	} {
		_, err := parseSweepFlag(text, []int{1})
		var u usageError
		if err == nil || !errors.As(err, &u) || !strings.Contains(err.Error(), want) {
			t.Errorf("--sweep %s: %v, want a usage error containing %q", text, err, want)
		}
	}
}
