package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/rewind-engine/rewind/dataflow/inspect"
	"github.com/rewind-engine/rewind/dataflow/storage"
)

// newInspectCmd lists what durable shared storage holds: by default the
// recovery points each executor left (complete or not, with sizes), with
// --objects every raw object; --verify reads everything and checks each
// checksum.
func newInspectCmd() *cobra.Command {
	var url, endpoint, prefix, format string
	var verify, objects bool
	cmd := &cobra.Command{
		Use:   "inspect",
		Short: "List the recovery points in a storage location, complete or not, with sizes",
		Long: `inspect lists what the executors left in durable shared storage: every
micro-batch, record-wise checkpoint and disk-phase finite job, whether a
restart may resume from it and why, and its size. --objects lists the raw
objects instead; --verify reads every object and checks its checksum (exit 1
when one fails).`,
		Example: `  rewind inspect                                # ./rewind-data, the default storage
  rewind inspect --storage s3://bucket/prefix --verify
  rewind inspect --objects --prefix recordwise/`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := storage.CheckURL(url); err != nil {
				return usageError{err}
			}
			if err := checkS3Endpoint(url, endpoint); err != nil {
				return err
			}
			if format != "text" && format != "json" {
				return usagef("invalid --format %q: allowed are text, json", format)
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
			ctx := cmd.Context()
			st, err := storage.Open(ctx, url, storage.Options{Endpoint: endpoint})
			if err != nil {
				return err
			}
			defer st.Close()
			objs, err := st.List(ctx, prefix)
			if err != nil {
				return err
			}
			bad := map[string]string{}
			if verify {
				bad = verifyObjects(ctx, st, objs)
			}
			w := cmd.OutOrStdout()
			if objects {
				err = printObjects(w, objs, verify, bad, format)
			} else {
				err = printRecoveryPoints(w, objs, bad, format)
			}
			if err != nil {
				return err
			}
			if len(bad) > 0 {
				return fmt.Errorf("%d of %d objects failed verification in %s", len(bad), len(objs), st.URL())
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&url, "storage", "file://./rewind-data", "durable shared storage: file://DIR or s3://bucket/prefix")
	fl.StringVar(&endpoint, "s3-endpoint", "", "S3 endpoint URL (default $REWIND_S3_ENDPOINT)")
	fl.StringVar(&prefix, "prefix", "", "only objects whose names start with this")
	fl.BoolVar(&verify, "verify", false, "read every object and check its checksum")
	fl.BoolVar(&objects, "objects", false, "list raw objects instead of recovery points")
	fl.StringVar(&format, "format", "text", "output format: text, json")
	return cmd
}

// verifyObjects reads every object; the result maps each one that fails to
// the reason.
func verifyObjects(ctx context.Context, st storage.Store, objs []storage.Object) map[string]string {
	bad := map[string]string{}
	for _, o := range objs {
		if _, err := st.Get(ctx, o.Name); err != nil {
			bad[o.Name] = err.Error()
		}
	}
	return bad
}

func printObjects(w io.Writer, objs []storage.Object, verify bool, bad map[string]string, format string) error {
	if format == "json" {
		type row struct {
			storage.Object
			Problem string `json:"problem,omitempty"`
		}
		rows := make([]row, len(objs))
		for i, o := range objs {
			rows[i] = row{o, bad[o.Name]}
		}
		return writeJSONLine(w, rows)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "OBJECT\tBYTES\tMODIFIED\tCHECKSUM\n")
	var total int64
	for _, o := range objs {
		state := "-"
		if verify {
			state = "ok"
			if why, ok := bad[o.Name]; ok {
				state = "BAD: " + why
			}
		}
		total += o.Size
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", o.Name, o.Size, o.ModTime.Format("2006-01-02 15:04:05"), state)
	}
	fmt.Fprintf(tw, "%d objects\t%d\t\t\n", len(objs), total)
	return tw.Flush()
}

// recoveryPoints asks every executor that knows its layout what the
// listing holds, sorted by executor, run and id.
func recoveryPoints(objs []storage.Object) []inspect.RecoveryPoint {
	var out []inspect.RecoveryPoint
	for _, name := range executorNames() {
		if in, ok := executors[name].(inspect.Inspector); ok {
			out = append(out, in.RecoveryPoints(objs)...)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Executor != b.Executor {
			return a.Executor < b.Executor
		}
		if a.Run != b.Run {
			return a.Run < b.Run
		}
		return a.ID < b.ID
	})
	return out
}

func printRecoveryPoints(w io.Writer, objs []storage.Object, bad map[string]string, format string) error {
	points := recoveryPoints(objs)
	claimed := map[string]bool{}
	for i := range points {
		p := &points[i]
		n := 0
		for _, name := range p.Names {
			claimed[name] = true
			if _, ok := bad[name]; ok {
				n++
			}
		}
		if n > 0 {
			// A restart cannot resume from a point it cannot read.
			p.Complete = false
			p.Status = fmt.Sprintf("%d objects FAIL their checksum; %s", n, p.Status)
		}
	}
	var others int
	var otherBytes int64
	for _, o := range objs {
		if !claimed[o.Name] {
			others++
			otherBytes += o.Size
		}
	}
	if format == "json" {
		return writeJSONLine(w, struct {
			RecoveryPoints []inspect.RecoveryPoint `json:"recovery_points"`
			OtherObjects   int                     `json:"other_objects"`
			OtherBytes     int64                   `json:"other_bytes"`
		}{points, others, otherBytes})
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "EXECUTOR\tRUN\tKIND\tID\tCOMPLETE\tOBJECTS\tBYTES\tMODIFIED\tSTATUS\n")
	for _, p := range points {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%d\t%d\t%s\t%s\n", p.Executor, p.Run, p.Kind, p.ID,
			map[bool]string{true: "yes", false: "no"}[p.Complete], p.Objects, p.Bytes, p.Modified.Format("2006-01-02 15:04:05"), p.Status)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "%d recovery points; %d other objects (%d bytes: run plans, coordinator markers, data files; --objects lists them)\n", len(points), others, otherBytes)
	return nil
}

func writeJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}
