package recordwise

// This file holds what a worker process's tasks measure, on its way to
// the coordinator's observer (--workers process): each measurement the
// observer would take in the task's process is a control message, applied
// to the one observer the run has, so the summary, the run over time and
// the latency are the same whether a task runs beside its coordinator or
// in a worker process.

import (
	"fmt"
	"time"
)

type obsKind uint8

const (
	obsRead obsKind = iota + 1
	obsRowsOut
	obsReplaysDropped
	obsHanded
	obsVisible
	obsLate
	obsLost
)

// obsMsg is one measurement: which one (Kind) and its values; times are
// wall-clock nanoseconds (wirelink.go says why that is enough here).
type obsMsg struct {
	Kind      obsKind    `json:"kind"`
	Input     string     `json:"input,omitempty"`
	Partition string     `json:"partition,omitempty"`
	Offset    int64      `json:"offset,omitempty"`
	N         int64      `json:"n,omitempty"`
	At        int64      `json:"at,omitempty"`
	Rows      [][2]int64 `json:"rows,omitempty"` // born, rows
}

func wireLat(rows []latEntry) [][2]int64 {
	out := make([][2]int64, len(rows))
	for i, r := range rows {
		out[i] = [2]int64{nanos(r.born), r.rows}
	}
	return out
}

func fromWireLat(rows [][2]int64) []latEntry {
	out := make([]latEntry, len(rows))
	for i, r := range rows {
		out[i] = latEntry{born: fromNanos(r[0]), rows: r[1]}
	}
	return out
}

// apply takes m into o, the coordinator's observer.
func (o *observer) apply(m obsMsg) error {
	at := time.Unix(0, m.At)
	switch m.Kind {
	case obsRead:
		o.read(m.Input, m.Partition, m.Offset, m.N, at)
	case obsRowsOut:
		o.addRowsOut(m.N)
	case obsReplaysDropped:
		o.addReplaysDropped(m.N)
	case obsHanded:
		o.handedOver(fromWireLat(m.Rows), at)
	case obsVisible:
		o.recordLatency(fromWireLat(m.Rows), at)
	case obsLate:
		o.addLate(m.N)
	case obsLost:
		o.addLost(m.N)
	default:
		return fmt.Errorf("a measurement of unknown kind %d", m.Kind)
	}
	return nil
}
