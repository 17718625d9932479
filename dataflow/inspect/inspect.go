// Package inspect reads recovery points out of a durable-storage listing,
// for `rewind inspect` and the executors' Inspectors, and holds the run
// namespace every executor's storage layout starts with (RunPrefix, and
// SplitRunName that takes it apart again).
package inspect

import (
	"strings"
	"time"

	"github.com/rewind-engine/rewind/dataflow/storage"
)

// RecoveryPoint is one place a restarted run could resume from, or one
// that was started and is not usable, as read from durable storage: a
// micro-batch, a record-wise checkpoint, a disk-phase finite job.
type RecoveryPoint struct {
	Executor string `json:"executor"`
	// Run is "<job>/<run id>".
	Run string `json:"run"`
	// Kind is what the executor calls it: batch, checkpoint, finite job.
	Kind string `json:"kind"`
	ID   int64  `json:"id"`
	// Complete says whether a restart may resume from it; Status says why
	// in the executor's own terms.
	Complete bool   `json:"complete"`
	Status   string `json:"status"`
	// Objects and Bytes count what it holds in storage; Modified is the
	// newest of their modification times.
	Objects  int       `json:"objects"`
	Bytes    int64     `json:"bytes"`
	Modified time.Time `json:"modified"`
	// Names are the objects it holds.
	Names []string `json:"-"`
}

// Add counts one object into p.
func (p *RecoveryPoint) Add(o storage.Object) {
	p.Objects++
	p.Bytes += o.Size
	p.Names = append(p.Names, o.Name)
	if o.ModTime.After(p.Modified) {
		p.Modified = o.ModTime
	}
}

// Inspector is an executor whose storage layout `rewind inspect` can read.
// RecoveryPoints looks only at a listing (names, sizes, times): it reads no
// object, so it is cheap on S3 and cannot be fooled into a crash by a
// corrupt one; `inspect --verify` checks the contents separately.
type Inspector interface {
	RecoveryPoints(objs []storage.Object) []RecoveryPoint
}

// RunPrefix is the namespace of one run in durable storage,
// "<executor>/<job>/<run id>/", under which every executor keeps its
// objects.
func RunPrefix(executor, job, runID string) string {
	return executor + "/" + job + "/" + runID + "/"
}

// SplitRunName splits an object name "<executor>/<job>/<run id>/<rest>"
// into "<job>/<run id>" and rest; ok is false for names of other executors
// or of another shape.
func SplitRunName(name, executor string) (runName, rest string, ok bool) {
	after, ok := strings.CutPrefix(name, executor+"/")
	if !ok {
		return "", "", false
	}
	f := strings.SplitN(after, "/", 3)
	if len(f) != 3 || f[0] == "" || f[1] == "" {
		return "", "", false
	}
	return f[0] + "/" + f[1], f[2], true
}

// PointSet groups the objects of a listing into recovery points by run and
// id, in the order they are first seen; each executor's Inspector decides
// which objects belong to which point and when a point is complete.
type PointSet struct {
	executor, kind string
	byKey          map[pointKey]*RecoveryPoint
	order          []*RecoveryPoint
}

type pointKey struct {
	run string
	id  int64
}

// NewPointSet returns an empty set of points of one executor and kind.
func NewPointSet(executor, kind string) *PointSet {
	return &PointSet{executor: executor, kind: kind, byKey: map[pointKey]*RecoveryPoint{}}
}

// Add counts o into the point (runName, id), creating it, and returns it.
func (s *PointSet) Add(runName string, id int64, o storage.Object) *RecoveryPoint {
	k := pointKey{runName, id}
	p := s.byKey[k]
	if p == nil {
		p = &RecoveryPoint{Executor: s.executor, Run: runName, Kind: s.kind, ID: id}
		s.byKey[k] = p
		s.order = append(s.order, p)
	}
	p.Add(o)
	return p
}

// Finish lets judge set Complete and Status on every point and returns them.
func (s *PointSet) Finish(judge func(p *RecoveryPoint)) []RecoveryPoint {
	out := make([]RecoveryPoint, len(s.order))
	for i, p := range s.order {
		judge(p)
		out[i] = *p
	}
	return out
}
