package recordwise

// This file holds the sink of a run with worker processes: the sink tasks
// run in the workers, and their rows are written by the coordinator. A
// sink task's writer is a wire data channel to the coordinator, which
// writes what arrives with a writer of the run's one sink and answers each
// flush once it is durable.
//
// Why the coordinator writes: the sink keeps state beside its files that
// one process must own. The idempotent store has one writer per process
// (its lock is a flock, and a second opener waits for it); append records
// the files each recovery point covers, from its writers' flushes, in the
// sink's memory; transactional commits what its writers staged. Writing in
// the coordinator keeps all three as they are in one process, at the cost
// of the sink's rows crossing one more connection.

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/sink"
	"github.com/rewind-engine/rewind/dataflow/wire"
)

// The sink channel's marker frames: op u8, epoch i64.
const (
	sinkEpoch = 1 // the batches that follow belong to epoch
	sinkFlush = 2 // flush epoch, and answer
)

func sinkMarker(op byte, epoch int64) []byte {
	return binary.LittleEndian.AppendUint64([]byte{op}, uint64(epoch))
}

var errSinkInWorker = errors.New("recordwise: the sink is driven by the coordinator, not by a worker process")

// procSink is the sink as a worker process's tasks see it: writers only.
type procSink struct {
	mode   sink.Mode
	conn   *wire.Conn
	alloc  memory.Allocator
	schema *arrow.Schema

	mu      sync.Mutex
	ctx     context.Context // the attempt's
	attempt int
	next    uint32
	waiting map[uint32]chan error
}

// begin makes the writers that follow belong to attempt, until ctx ends.
func (s *procSink) begin(ctx context.Context, attempt int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ctx, s.attempt, s.next = ctx, attempt, 0
}

func (s *procSink) Mode() sink.Mode { return s.mode }

// Writer opens a data channel to the coordinator and asks it for a writer
// of subtask at the other end.
func (s *procSink) Writer(subtask int, attempt int) (sink.Writer, error) {
	s.mu.Lock()
	id := sinkChannel(attempt, s.next)
	s.next++
	ctx := s.ctx
	reply := make(chan error, 1)
	s.waiting[id] = reply
	s.mu.Unlock()
	tx, err := s.conn.OpenSender(id, s.schema, s.alloc)
	if err != nil {
		return nil, err
	}
	if err := sendMsg(s.conn, procMsg{Op: opWriter, Attempt: attempt, Channel: id, Subtask: subtask}); err != nil {
		return nil, err
	}
	return &procWriter{s: s, id: id, tx: tx, ctx: ctx, reply: reply, epoch: -1}, nil
}

// flushed hands the coordinator's answer to a flush to its writer.
func (s *procSink) flushed(m procMsg) {
	s.mu.Lock()
	reply := s.waiting[m.Channel]
	s.mu.Unlock()
	if reply == nil {
		return
	}
	var err error
	if m.Text != "" {
		err = errors.New(m.Text)
	}
	select {
	case reply <- err:
	default: // an answer nobody asked for: the writer is gone
	}
}

func (s *procSink) Commit(int64) error  { return errSinkInWorker }
func (s *procSink) Record(int64) error  { return errSinkInWorker }
func (s *procSink) Recover(int64) error { return errSinkInWorker }
func (s *procSink) Finish() error       { return errSinkInWorker }
func (s *procSink) Close() error        { return nil }

// procWriter is a sink task's writer in a worker process.
type procWriter struct {
	s     *procSink
	id    uint32
	tx    *wire.Sender
	ctx   context.Context
	reply chan error
	epoch int64
}

func (w *procWriter) Write(epoch int64, b arrow.RecordBatch) error {
	if epoch != w.epoch {
		if err := w.tx.Barrier(w.ctx, sinkMarker(sinkEpoch, epoch)); err != nil {
			return err
		}
		w.epoch = epoch
	}
	return w.tx.Send(w.ctx, b)
}

// Flush returns once the coordinator's writer flushed.
func (w *procWriter) Flush(epoch int64) error {
	if err := w.tx.Barrier(w.ctx, sinkMarker(sinkFlush, epoch)); err != nil {
		return err
	}
	select {
	case err := <-w.reply:
		return err
	case <-w.ctx.Done():
		return w.ctx.Err()
	}
}

func (w *procWriter) Close() error {
	w.s.mu.Lock()
	delete(w.s.waiting, w.id)
	w.s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return w.tx.End(ctx)
}

// serveWriter writes what a worker's sink writer sends on rx with w, and
// answers each flush on c, until the channel ends or ctx does; it closes
// w.
func serveWriter(ctx context.Context, c *wire.Conn, id uint32, rx *wire.Receiver, w sink.Writer) error {
	defer rx.Close()
	defer w.Close()
	epoch := int64(-1)
	var failed error // a write's error, answered at the next flush
	for {
		it, err := rx.Next(ctx)
		if err != nil {
			return err
		}
		switch {
		case it.End:
			return nil
		case it.Batch != nil:
			if failed == nil && epoch >= 0 {
				failed = w.Write(epoch, it.Batch)
			} else if failed == nil {
				failed = errors.New("rows before their epoch")
			}
			it.Batch.Release()
		default:
			p := it.Barrier
			if len(p) != 9 || (p[0] != sinkEpoch && p[0] != sinkFlush) {
				return fmt.Errorf("sink channel %d: a marker frame that is not one (%d bytes)", id, len(p))
			}
			e := int64(binary.LittleEndian.Uint64(p[1:]))
			if p[0] == sinkEpoch {
				epoch = e
				continue
			}
			err := failed
			if err == nil {
				err = w.Flush(e)
			}
			text := ""
			if err != nil {
				text = err.Error()
			}
			if err := sendMsg(c, procMsg{Op: opFlushed, Channel: id, Epoch: e, Text: text}); err != nil {
				return err
			}
		}
	}
}
