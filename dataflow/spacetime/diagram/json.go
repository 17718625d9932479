package diagram

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/rewind-engine/rewind/dataflow/spacetime"
)

// wireEvent is an event as the JSON format writes it: its time in
// microseconds since the run started, as the field's name says (a bare
// time.Duration would be written in nanoseconds).
type wireEvent struct {
	T float64 `json:"t_us"`
	spacetime.Event
}

type wire struct {
	Lanes  []spacetime.Lane `json:"lanes"`
	Events []wireEvent      `json:"events"`
}

// WriteJSON writes rec as one JSON object: the lanes and the events, raw.
func WriteJSON(w io.Writer, rec Recording) error {
	out := wire{Lanes: rec.Lanes, Events: make([]wireEvent, len(rec.Events))}
	if out.Lanes == nil {
		out.Lanes = []spacetime.Lane{}
	}
	for i, e := range rec.Events {
		out.Events[i] = wireEvent{T: float64(e.T) / float64(time.Microsecond), Event: e}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", " ")
	return enc.Encode(out)
}

// ReadJSON reads what WriteJSON wrote.
func ReadJSON(r io.Reader) (Recording, error) {
	var in wire
	if err := json.NewDecoder(r).Decode(&in); err != nil {
		return Recording{}, fmt.Errorf("reading a trace recording: %w", err)
	}
	rec := Recording{Lanes: in.Lanes, Events: make([]spacetime.Event, len(in.Events))}
	for i, e := range in.Events {
		rec.Events[i] = e.Event
		rec.Events[i].T = time.Duration(math.Round(e.T * float64(time.Microsecond)))
	}
	return rec, nil
}
