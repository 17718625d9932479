package recordwise

import (
	"encoding/binary"
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/operator"
	"github.com/rewind-engine/rewind/dataflow/sink"
	"github.com/rewind-engine/rewind/recordwise/checkpoint"
)

// publishedRows are the rows a transactional sink already made visible in
// epochs the restored recovery point does not cover. That happens only
// after a fallback: the newest complete point was committed (its epochs
// published) and then proved unreadable, so the run resumed from an older
// one and replays input whose output is already visible. The sink tasks
// drop replayed rows whose write key and _version are among these, so no
// row is published twice; a correct run never emits two rows with the same
// write key and _version, so this drops replays only. (A replay may give
// such a row other values than the visible one, as the changelog of a count
// can when the channels interleave differently; the visible row stays. The
// row with the greatest _version of a key reflects the same input either
// way.)
type publishedRows struct {
	cols []string // the write-key columns, then _version
	seen map[string]struct{}
	key  []byte
}

// newPublishedRows indexes rows, in the layout's column order.
func newPublishedRows(layout sink.Layout, rows [][]int64) (*publishedRows, error) {
	names := sink.ColumnNames(layout.Schema)
	p := &publishedRows{cols: append(slices.Clone(layout.WriteKey), sink.VersionColumn), seen: make(map[string]struct{}, len(rows))}
	idx := make([]int, len(p.cols))
	for i, c := range p.cols {
		if idx[i] = slices.Index(names, c); idx[i] < 0 {
			return nil, fmt.Errorf("output layout has no column %q", c)
		}
	}
	vals := make([]int64, len(idx))
	for _, r := range rows {
		for i, j := range idx {
			vals[i] = r[j]
		}
		p.seen[string(p.encode(vals))] = struct{}{}
	}
	return p, nil
}

func (p *publishedRows) encode(vals []int64) []byte {
	p.key = p.key[:0]
	for _, v := range vals {
		p.key = binary.LittleEndian.AppendUint64(p.key, uint64(v))
	}
	return p.key
}

// filter returns b without the rows already published. When it drops none
// it returns b itself (still borrowed, owned false); otherwise a new batch
// the caller must release. It is not safe for concurrent use: each sink
// task holds its own copy (see clone).
func (p *publishedRows) filter(b arrow.RecordBatch, alloc memory.Allocator) (out arrow.RecordBatch, owned bool, err error) {
	n := int(b.NumRows())
	src := make([][]int64, len(p.cols))
	for i, c := range p.cols {
		j := b.Schema().FieldIndices(c)
		if len(j) != 1 {
			return nil, false, fmt.Errorf("sink batch has no column %q", c)
		}
		a, ok := b.Column(j[0]).(*array.Int64)
		if !ok {
			return nil, false, fmt.Errorf("sink batch column %q is %s, want int64", c, b.Column(j[0]).DataType())
		}
		src[i] = a.Int64Values()
	}
	vals := make([]int64, len(p.cols))
	var keep []int
	for r := 0; r < n; r++ {
		for i := range src {
			vals[i] = src[i][r]
		}
		if _, ok := p.seen[string(p.encode(vals))]; ok {
			if keep == nil {
				keep = make([]int, 0, n)
				for k := 0; k < r; k++ {
					keep = append(keep, k)
				}
			}
			continue
		}
		if keep != nil {
			keep = append(keep, r)
		}
	}
	if keep == nil {
		return b, false, nil
	}
	cols := make([]arrow.Array, b.NumCols())
	for c := range cols {
		in, ok := b.Column(c).(*array.Int64)
		if !ok {
			for _, a := range cols[:c] {
				a.Release()
			}
			return nil, false, fmt.Errorf("sink batch column %q is %s, want int64", b.ColumnName(c), b.Column(c).DataType())
		}
		a, v := operator.AllocInt64(alloc, len(keep))
		iv := in.Int64Values()
		for k, r := range keep {
			v[k] = iv[r]
		}
		cols[c] = a
	}
	return operator.NewBatchOwning(b.Schema(), len(keep), cols...), true, nil
}

// clone shares the index (read only) with a scratch key of its own.
func (p *publishedRows) clone() *publishedRows {
	if p == nil {
		return nil
	}
	return &publishedRows{cols: p.cols, seen: p.seen}
}

// reconcilePublished makes the restored sink tasks start after every epoch
// the sink already published, and drop the replays of rows already visible.
//
// Epochs after the restored point (complete) can be visible only when the
// restore fell back past a newer recovery point that was committed and then
// proved unreadable. Then the replay would publish their rows again (and,
// reusing their epoch numbers, replace some of their files): the rule is
// that a row already visible is never published again, so their rows are
// read back and the sink tasks drop their replays (see publishedRows).
//
// That replay outlives the incarnation that starts it: a recovery point
// taken while it is under way covers only a prefix of the input whose rows
// are visible, and a run restored from it replays the rest. So every point
// such an incarnation takes names the epochs whose replays it drops
// (metadata.Replayed, carried here), and a restore from it drops them too.
// They stay for the rest of the run: the replay may be past them by then,
// but a correct run never emits a row twice, so only replays are dropped.
func (inc *incarnation) reconcilePublished(complete int64, carried []epochSpan) error {
	inc.firstEpoch = int64(inc.from) + 1
	pub, ok := inc.env.Sink.(sink.EpochPublisher)
	if !ok {
		return nil
	}
	last, rows, err := pub.PublishedAfter(complete)
	if err != nil {
		return fmt.Errorf("sink recovery to epoch %d: %w", complete, err)
	}
	newer := len(rows)
	var spans []epochSpan
	for _, sp := range carried {
		r, err := publishedIn(pub, sp)
		if err != nil {
			return fmt.Errorf("sink recovery to epoch %d: %w", complete, err)
		}
		inc.obs.note(fmt.Sprintf("recovery point %d was taken while a replay after a fallback was under way: "+
			"the %d rows visible in epochs %d to %d are still not published again", inc.from, len(r), max(sp.After+1, 1), sp.Through))
		rows = append(rows, r...)
		spans = addSpan(spans, sp)
	}
	if last > complete {
		spans = addSpan(spans, epochSpan{After: complete, Through: last})
		inc.firstEpoch = last + 1
		inc.obs.note(fmt.Sprintf("resumed from recovery point %d while the sink had published epochs up to %d: "+
			"the %d rows visible in epochs after %d are not published again", inc.from, last, newer, complete))
	}
	if len(spans) == 0 {
		return nil
	}
	inc.replayed, inc.publishedRaw = spans, rows
	if inc.published, err = newPublishedRows(inc.env.Job.Output, rows); err != nil {
		return fmt.Errorf("sink recovery to epoch %d: %w", complete, err)
	}
	return nil
}

// addSpan appends sp to spans (sorted, disjoint; sp after them), joining
// it to the last one when they touch.
func addSpan(spans []epochSpan, sp epochSpan) []epochSpan {
	if n := len(spans); n > 0 && spans[n-1].Through >= sp.After {
		spans[n-1].Through = max(spans[n-1].Through, sp.Through)
		return spans
	}
	return append(spans, sp)
}

// publishedIn returns the visible rows of the epochs of sp: those after
// sp.After less those after sp.Through, as multisets (a file is wholly of
// one epoch, so the rows after sp.Through are among those after sp.After).
func publishedIn(pub sink.EpochPublisher, sp epochSpan) ([][]int64, error) {
	_, all, err := pub.PublishedAfter(sp.After)
	if err != nil {
		return nil, err
	}
	_, later, err := pub.PublishedAfter(sp.Through)
	if err != nil || len(later) == 0 {
		return all, err
	}
	var key strings.Builder
	enc := func(r []int64) string {
		key.Reset()
		for _, v := range r {
			var b [8]byte
			binary.LittleEndian.PutUint64(b[:], uint64(v))
			key.Write(b[:])
		}
		return key.String()
	}
	n := make(map[string]int, len(later))
	for _, r := range later {
		n[enc(r)]++
	}
	out := all[:0]
	for _, r := range all {
		if k := enc(r); n[k] > 0 {
			n[k]--
			continue
		}
		out = append(out, r)
	}
	return out, nil
}

// checkReplayed rejects replayed epochs a recovery point id cannot name:
// the incarnation that took it wrote its first epoch after every span, and
// its checkpoint ids are its epochs.
func checkReplayed(spans []epochSpan, id checkpoint.ID) error {
	prev := int64(-1)
	for _, sp := range spans {
		if sp.After < prev || sp.Through <= sp.After || sp.Through >= int64(id) {
			return fmt.Errorf("replayed epochs %d to %d cannot precede recovery point %d", sp.After+1, sp.Through, id)
		}
		prev = sp.Through
	}
	return nil
}
