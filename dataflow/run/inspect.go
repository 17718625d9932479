package run

import (
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
