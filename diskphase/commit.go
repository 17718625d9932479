package diskphase

// This file holds the job commit of the output committer: writing the
// staged output of every unit in the ledger through the sink.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/rewind-engine/rewind/dataflow/operator"
	"github.com/rewind-engine/rewind/dataflow/sink"
)

// commit is the job commit of the output committer: the staged output of
// every unit named in the ledger is written through the sink under the
// job's epoch, the sink commits the epoch, and the _SUCCESS marker makes
// the commit durable.
func (c *coordinator) commit(ctx context.Context, a actCommit) error {
	x := c.x
	c.commitJ = a.Job
	x.met.commitStarted(a.Job, time.Now())
	if err := c.point(pointBeforeCommit); err != nil {
		return err
	}
	epoch := int64(a.Job)
	appendMode := x.env.Sink.Mode() == sink.Append
	published := map[int]bool{}
	if appendMode {
		objs, err := x.store.List(ctx, x.names.publishedDir(a.Job))
		if err != nil {
			return err
		}
		for _, o := range objs {
			if p := x.names.parse(o.Name); p.kind == objPublished {
				published[p.num] = true
			}
		}
	}
	first, marked := true, false
	for _, p := range a.Parts {
		if p.File.Name == "" {
			continue
		}
		if published[p.Subtask] {
			// Written by an earlier commit of the job: its files are
			// checked and listed in this commit's record.
			if err := c.adopt(ctx, a.Job, p.Subtask, epoch); err != nil {
				return err
			}
			continue
		}
		receipt, err := c.writePart(ctx, p, a, epoch)
		var bad *fileBadError
		if errors.As(err, &bad) {
			c.commitJ = -1
			rec := x.met.newRecovery(fmt.Sprintf("%s, found by the commit of job %d", bad.Error(), a.Job), time.Now(), true)
			x.met.interrupted(rec, bad.producer, false)
			x.met.lossRerun()
			x.tracef(traceEvent{Kind: "lost", Unit: bad.producer, Detail: bad.file})
			producer, err := c.planLostFile(bad)
			if err != nil {
				return err
			}
			c.queue = append(c.queue, evCommitFileBad{Job: a.Job, Producer: producer, File: bad.file})
			return nil
		}
		if err != nil {
			return err
		}
		if first {
			first = false
			if err := c.point(pointMidCommit); err != nil {
				return err
			}
		}
		if appendMode {
			// The marker carries the writer's receipt (see
			// sink.Receipter): a kill before the job's record leaves
			// the partition's files listed nowhere else.
			if err := x.store.Put(ctx, x.names.published(a.Job, p.Subtask), receipt); err != nil {
				return err
			}
		}
		if !marked {
			marked = true
			if err := c.point(pointAfterPartition); err != nil {
				return err
			}
		}
	}
	if first {
		// Nothing to write: the points still mark the middle of the commit.
		if err := c.point(pointMidCommit); err != nil {
			return err
		}
		if err := c.point(pointAfterPartition); err != nil {
			return err
		}
	}
	// The sink's record of the job's files is durable before _SUCCESS
	// (see sink.Sink.Record); Commit publishes (transactional).
	if err := x.env.Sink.Record(epoch); err != nil {
		return err
	}
	if err := x.env.Sink.Commit(epoch); err != nil {
		return err
	}
	b, err := json.Marshal(a.Commit)
	if err != nil {
		return err
	}
	if err := x.store.Put(ctx, x.names.success(a.Job), b); err != nil {
		return err
	}
	now := time.Now()
	c.commitJ = -1
	x.handover.visible(a.Commit.Ends, now, func(d time.Duration, n int64) {
		x.met.visibleLatency(now, d, n)
	})
	wm, ok := c.wms[a.Job]
	if !ok {
		wm = operator.NoWatermark
	}
	x.met.jobCommitted(a.Commit, wm, now)
	x.tracef(traceEvent{Kind: "committed", Job: a.Job})
	if err := c.point(pointAfterCommit); err != nil {
		return err
	}
	c.queue = append(c.queue, evCommitted{Job: a.Job})
	return nil
}

// writePart writes one staged output file through a fresh sink writer
// and returns the writer's receipt, if the sink gives one. The file's
// chunks are read one at a time and flushed once, at the end: a chunk
// found bad closes the writer unflushed, so nothing of the part was
// written and the redone commit flushes it once, as the sink expects.
func (c *coordinator) writePart(ctx context.Context, p commitPart, a actCommit, epoch int64) ([]byte, error) {
	x := c.x
	w, err := x.env.Sink.Writer(p.Subtask, a.Attempt)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	var n int64
	for _, ch := range p.File.chunks() {
		data, err := x.fetch(ctx, ch, p.Producer)
		if err != nil {
			return nil, err
		}
		k, err := decodeFile(data, ch, p.Producer, x.topo.out, x, func(b arrow.RecordBatch) error {
			return w.Write(epoch, b)
		})
		if err != nil {
			return nil, err
		}
		n += k
	}
	if err := w.Flush(epoch); err != nil {
		return nil, err
	}
	x.met.rowsWritten(n)
	var receipt []byte
	if r, ok := x.env.Sink.(sink.Receipter); ok {
		if receipt, err = r.Receipt(w); err != nil {
			return nil, err
		}
	}
	return receipt, nil
}

// adopt hands the receipt in partition sub's published marker of job j
// back to the sink, which checks the files it names.
func (c *coordinator) adopt(ctx context.Context, j, sub int, epoch int64) error {
	x := c.x
	r, ok := x.env.Sink.(sink.Receipter)
	if !ok {
		return nil
	}
	name := x.names.published(j, sub)
	receipt, err := x.store.Get(ctx, name)
	if err != nil {
		return fmt.Errorf("reading the published marker %s of job %d partition %d: %w", name, j, sub, err)
	}
	if err := r.Adopt(epoch, receipt); err != nil {
		return fmt.Errorf("published marker %s of job %d partition %d, written by an earlier commit: %w", name, j, sub, err)
	}
	return nil
}
