package main

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/rewind-engine/rewind/dataflow/mistake"
)

// offsetSkew is how many records the offset lessons' saved read position
// lies off the cut.
const offsetSkew = 3

func init() {
	addLesson(lesson{
		name:  mistake.OffsetBehind,
		brief: fmt.Sprintf("read position saved %d behind the cut: they count twice", offsetSkew),
		why: "A recovery point is one cut: the state holds every record before it, the saved read position names where it lies. " +
			"Saved behind it, the restored source reads again records the restored state already counted, so each one counts twice. " +
			"The position must be taken at the marker, with the state, not before or after.",
		teach: func(c *classroom) (*verdict, error) { return c.offsetLesson(mistake.OffsetBehind) },
	})
	addLesson(lesson{
		name:  mistake.OffsetAhead,
		brief: fmt.Sprintf("read position saved %d ahead of the cut: they are skipped", offsetSkew),
		why: "The restored state holds only the records before the cut, but the saved read position lies past records it never counted. " +
			"After the restore the source starts there, so nothing ever counts those records: they are lost without any error. " +
			"A position ahead of the state is as wrong as one behind it; only the marker's place is right.",
		teach: func(c *classroom) (*verdict, error) { return c.offsetLesson(mistake.OffsetAhead) },
	})
}

// offsetLesson: the records between the saved position and the cut, in
// every partition of the restored point whose position was skewed, count
// once more (behind) or once less (ahead).
func (c *classroom) offsetLesson(n mistake.Name) (*verdict, error) {
	r, err := c.cutLesson(n, cutSetup{records: offsetSkew})
	if err != nil {
		return nil, err
	}
	steps := r.stepsAt(r.restored)
	if len(steps) == 0 {
		return nil, fmt.Errorf("--teach %s: the run restored point %d, whose read positions were not skewed", n, r.restored)
	}
	sign, verb := int64(1), "read twice"
	if n == mistake.OffsetAhead {
		sign, verb = -1, "skipped"
	}
	slices.SortFunc(steps, func(a, b mistake.Step) int { return cmp.Compare(a.Partition, b.Partition) })
	pred := changes{}
	var where []string
	for _, s := range steps {
		recs, err := c.records(r.wrong.cfg, s.Input, s.Partition, s.From, s.To)
		if err != nil {
			return nil, err
		}
		for _, rec := range recs {
			pred.add(rec, sign)
		}
		where = append(where, fmt.Sprintf("p%d [%d,%d)", s.Partition, s.From, s.To))
	}
	return r.cutVerdict(n, pred, fmt.Sprintf("point %d: %s %s", r.restored, strings.Join(where, " "), verb))
}
