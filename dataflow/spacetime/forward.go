package spacetime

import "time"

// A worker process draws on a recorder of its own and forwards what it
// drew to its coordinator's, which renders the diagram: the worker
// records on a Recorder started at the coordinator's run start (passed
// as wall-clock time, which both processes on one machine share), drains
// it now and then into a Forwarded message, and the coordinator merges
// it. Lanes are the coordinator's to declare; a worker's declarations
// stay with it.
//
// How far each lane has read travels too, so a replacement process can
// be seeded with what its dead predecessor read (SeedReads) and its
// first re-read is drawn as a replay, as it would be in one process.

// Forwarded is what a worker process's recorder sends: the events since
// its last Drain, each with its time since the run started, and how far
// each lane has read each partition so far.
type Forwarded struct {
	Events []Event          `json:"events,omitempty"`
	Reads  map[string]int64 `json:"reads,omitempty"`
}

// Empty says there is nothing to send.
func (f Forwarded) Empty() bool { return len(f.Events) == 0 && len(f.Reads) == 0 }

// Start is the moment the recorder's clock counts from, to pass to a
// worker process, which records on NewRecorder(time.Unix(0, ns)) of it.
func (r *Recorder) Start() time.Time {
	if r == nil {
		return time.Time{}
	}
	return r.start
}

// Drain returns the events recorded since the last Drain, and forgets
// them, with the read marks changed since then.
func (r *Recorder) Drain() Forwarded {
	if r == nil {
		return Forwarded{}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	f := Forwarded{Events: r.events}
	r.events = nil
	if len(r.dirty) > 0 {
		f.Reads = make(map[string]int64, len(r.dirty))
		for k := range r.dirty {
			f.Reads[k] = r.read[k]
		}
		clear(r.dirty)
	}
	return f
}

// Merge adds what a worker process's recorder drained, keeping each
// event's time, and moves each read mark forward.
func (r *Recorder) Merge(f Forwarded) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, f.Events...)
	r.raiseReads(f.Reads)
}

// Reads returns how far each lane has read each partition, keyed as
// Drain sends them, to seed a replacement worker's recorder.
func (r *Recorder) Reads() map[string]int64 {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]int64, len(r.read))
	for k, v := range r.read {
		out[k] = v
	}
	return out
}

// SeedReads moves the read marks forward to m (Reads of the
// coordinator's recorder), so reading below them again is a replay.
func (r *Recorder) SeedReads(m map[string]int64) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.raiseReads(m)
}

func (r *Recorder) raiseReads(m map[string]int64) {
	for k, v := range m {
		if cur, ok := r.read[k]; !ok || v > cur {
			r.read[k] = v
		}
	}
}
