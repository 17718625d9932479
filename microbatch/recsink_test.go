package microbatch

import (
	"fmt"
	"slices"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/rewind-engine/rewind/dataflow/sink"
)

// batchLedger is the outside world's memory of what each sink subtask
// received per batch id. It outlives executor processes (a test shares one
// between runs), like the metadata log of a sink that deduplicates by
// batch id.
type batchLedger struct {
	mu        sync.Mutex
	delivered map[[2]int64][][]int64 // (subtask, epoch) -> sorted rows of the first flushed delivery
	redeliver int                    // re-deliveries seen
	mismatch  []string
}

func newBatchLedger() *batchLedger {
	return &batchLedger{delivered: map[[2]int64][][]int64{}}
}

// recordingSink wraps a sink. It checks that every re-delivery of a batch
// id to a subtask holds exactly the rows of the first delivery (what makes
// re-delivery by batch id safe), and with dedup it drops re-deliveries, as
// a sink that skips batch ids it already has would.
type recordingSink struct {
	sink.Sink
	ledger *batchLedger
	cols   []string
	dedup  bool
}

func (s *recordingSink) Writer(subtask, attempt int) (sink.Writer, error) {
	w, err := s.Sink.Writer(subtask, attempt)
	if err != nil {
		return nil, err
	}
	return &recordingWriter{Writer: w, s: s, subtask: subtask, rows: map[int64][][]int64{}}, nil
}

type recordingWriter struct {
	sink.Writer
	s       *recordingSink
	subtask int
	rows    map[int64][][]int64
}

func (w *recordingWriter) Write(epoch int64, b arrow.RecordBatch) error {
	var err error
	w.rows[epoch], err = sink.RowsOf(b, w.s.cols, w.rows[epoch])
	if err != nil {
		return err
	}
	if w.s.dedup {
		w.s.ledger.mu.Lock()
		_, seen := w.s.ledger.delivered[[2]int64{int64(w.subtask), epoch}]
		w.s.ledger.mu.Unlock()
		if seen {
			return nil
		}
	}
	return w.Writer.Write(epoch, b)
}

func (w *recordingWriter) Flush(epoch int64) error {
	if err := w.Writer.Flush(epoch); err != nil {
		return err
	}
	l := w.s.ledger
	l.mu.Lock()
	defer l.mu.Unlock()
	for e, rows := range w.rows {
		if e > epoch {
			continue
		}
		delete(w.rows, e)
		slices.SortFunc(rows, slices.Compare)
		k := [2]int64{int64(w.subtask), e}
		first, seen := l.delivered[k]
		if !seen {
			l.delivered[k] = rows
			continue
		}
		l.redeliver++
		if !slices.EqualFunc(first, rows, slices.Equal) {
			l.mismatch = append(l.mismatch, fmt.Sprintf("batch %d subtask %d: first delivery had %d rows, re-delivery %d rows",
				e, w.subtask, len(first), len(rows)))
		}
	}
	return nil
}
