package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/rewind-engine/rewind/dataflow/storage"
)

// newInspectCmd lists what durable shared storage holds. The executors give
// the objects their meaning (recovery points, logs, ledgers); until they
// land, inspect shows the raw objects and can verify every checksum.
func newInspectCmd() *cobra.Command {
	var url, endpoint, prefix string
	var verify bool
	cmd := &cobra.Command{
		Use:   "inspect",
		Short: "List the objects in a storage location, with sizes, and verify their checksums",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := storage.CheckURL(url); err != nil {
				return usageError{err}
			}
			// Inspecting must not create the directory it was asked about.
			if !strings.HasPrefix(strings.ToLower(url), "s3://") {
				dir := url
				if strings.HasPrefix(strings.ToLower(dir), "file://") {
					dir = dir[len("file://"):]
				}
				if _, err := os.Stat(dir); err != nil {
					return usagef("invalid --storage %s: %v", url, err)
				}
			}
			st, err := storage.Open(cmd.Context(), url, storage.Options{Endpoint: endpoint})
			if err != nil {
				return err
			}
			defer st.Close()
			objs, err := st.List(cmd.Context(), prefix)
			if err != nil {
				return err
			}
			return printObjects(cmd.Context(), cmd.OutOrStdout(), st, objs, verify)
		},
	}
	cmd.Flags().StringVar(&url, "storage", "file://./rewind-data", "durable shared storage: file://DIR or s3://bucket/prefix")
	cmd.Flags().StringVar(&endpoint, "s3-endpoint", "", "S3 endpoint URL (default $REWIND_S3_ENDPOINT)")
	cmd.Flags().StringVar(&prefix, "prefix", "", "only objects whose names start with this")
	cmd.Flags().BoolVar(&verify, "verify", false, "read every object and check its checksum")
	return cmd
}

func printObjects(ctx context.Context, w io.Writer, st storage.Store, objs []storage.Object, verify bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "OBJECT\tBYTES\tMODIFIED\tCHECKSUM\n")
	var total int64
	bad := 0
	for _, o := range objs {
		state := "-"
		if verify {
			state = "ok"
			if _, err := st.Get(ctx, o.Name); err != nil {
				state = "BAD: " + err.Error()
				bad++
			}
		}
		total += o.Size
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", o.Name, o.Size, o.ModTime.Format("2006-01-02 15:04:05"), state)
	}
	fmt.Fprintf(tw, "%d objects\t%d\t\t\n", len(objs), total)
	if err := tw.Flush(); err != nil {
		return err
	}
	if bad > 0 {
		return fmt.Errorf("%d of %d objects failed verification in %s", bad, len(objs), st.URL())
	}
	return nil
}
