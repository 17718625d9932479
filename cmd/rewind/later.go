package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// The command below is part of the CLI's shape from the start so scripts
// and docs can name it; it says plainly that it is not built yet.

func newTraceCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "trace",
		Short: "Show where markers travelled and what was replayed in a tiny run (not implemented yet)",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			return errors.New("rewind trace is not implemented yet: it arrives with the record-wise executor (issue #4)")
		},
	}
}
