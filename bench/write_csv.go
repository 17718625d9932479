package bench

import (
	"encoding/csv"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// The CSV files are for a spreadsheet or a notebook: one header row, plain
// numbers (milliseconds, records, bytes), an empty cell for a figure that
// was not measured, never a zero standing in for one.

// resultsHeader is results.csv's header: who and when, the verdict, then
// every figure under its JSON name.
func resultsHeader() []string {
	h := []string{"contestant", "repeat", "seq", "sweep_point", "cadence_ms", "rate", "fault", "fault_at_ms",
		"correct", "diff", "error", "points_before_fault", "steady_state"}
	for _, m := range Metrics {
		h = append(h, m.Key)
	}
	return append(h, "modelled", "measured")
}

func (r *Results) writeResultsCSV(path string) error {
	return writeCSV(path, func(w *csv.Writer) error {
		if err := w.Write(resultsHeader()); err != nil {
			return err
		}
		for i := range r.Runs {
			run := &r.Runs[i]
			row := []string{run.Contestant, strconv.Itoa(run.Repeat), strconv.Itoa(run.Seq), run.SweepPoint,
				num(run.CadenceMs), num(run.Rate), run.Fault, optNum(run.FaultAtMs),
				strconv.FormatBool(run.Correct), run.Diff, run.Error,
				strconv.Itoa(run.PointsBeforeFault), strconv.FormatBool(run.SteadyState)}
			for _, m := range Metrics {
				if v, ok := m.of(&run.Figures); ok {
					row = append(row, num(v))
				} else {
					row = append(row, "")
				}
			}
			row = append(row, strings.Join(run.Figures.Modelled, ";"), strings.Join(run.Figures.Measured, ";"))
			if err := w.Write(row); err != nil {
				return err
			}
		}
		return nil
	})
}

var timelineHeader = []string{"contestant", "repeat", "sweep_point", "t_ms", "offered", "processed", "reread",
	"lag", "visible", "latency_p50_ms", "latency_p99_ms", "latency_max_ms"}

// writeTimelineCSV writes one row per run × bucket.
func (r *Results) writeTimelineCSV(path string) error {
	return writeCSV(path, func(w *csv.Writer) error {
		if err := w.Write(timelineHeader); err != nil {
			return err
		}
		for i := range r.Runs {
			run := &r.Runs[i]
			if run.Series == nil {
				continue
			}
			for _, b := range run.Series.Buckets {
				row := []string{run.Contestant, strconv.Itoa(run.Repeat), run.SweepPoint, num(b.TMs),
					itoa(b.Offered), itoa(b.Processed), itoa(b.Reread), itoa(b.Lag), itoa(b.Visible), "", "", ""}
				if l := b.Latency; l != nil {
					row[9], row[10], row[11] = num(l.P50), num(l.P99), num(l.Max)
				}
				if err := w.Write(row); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

var eventsHeader = []string{"contestant", "repeat", "sweep_point", "t_ms", "kind", "id", "status"}

// phaseBoundaries name a crash's boundaries in timeline_events.csv.
var phaseBoundaries = []string{"fault", "detected", "acquired", "restored", "caught_up"}

// writeEventsCSV writes every run's events (recovery points with their
// status, crashes, rewinds) and its crashes' phase boundaries, as rows of
// kind "phase" whose status names the boundary and whose id counts the
// crashes of the run from 0; a boundary never reached has no row.
func (r *Results) writeEventsCSV(path string) error {
	return writeCSV(path, func(w *csv.Writer) error {
		if err := w.Write(eventsHeader); err != nil {
			return err
		}
		for i := range r.Runs {
			run := &r.Runs[i]
			if run.Series == nil {
				continue
			}
			head := []string{run.Contestant, strconv.Itoa(run.Repeat), run.SweepPoint}
			for _, e := range run.Series.Events {
				if err := w.Write(append(head[:3:3], num(e.TMs), e.Kind, itoa(e.ID), e.Status)); err != nil {
					return err
				}
			}
			for n, ph := range run.Series.Phases {
				at := []*float64{&ph.FaultMs, ph.DetectedMs, ph.AcquiredMs, ph.RestoredMs, ph.CaughtUpMs}
				for j, t := range at {
					if t == nil {
						continue
					}
					if err := w.Write(append(head[:3:3], num(*t), "phase", strconv.Itoa(n), phaseBoundaries[j])); err != nil {
						return err
					}
				}
			}
		}
		return nil
	})
}

func writeCSV(path string, body func(*csv.Writer) error) error {
	fh, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(fh)
	if err := body(w); err != nil {
		fh.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	w.Flush()
	if err := w.Error(); err != nil {
		fh.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return fh.Close()
}

// num writes a figure with at most three decimals and no trailing zeros.
func num(v float64) string {
	s := strconv.FormatFloat(v, 'f', 3, 64)
	s = strings.TrimSuffix(strings.TrimRight(s, "0"), ".")
	if s == "-0" {
		return "0"
	}
	return s
}

func optNum(p *float64) string {
	if p == nil {
		return ""
	}
	return num(*p)
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }
