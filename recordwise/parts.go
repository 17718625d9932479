package recordwise

// This file holds the incarnation's part writer: each task hands it its
// part of a checkpoint, which it writes to durable storage asynchronously
// and acknowledges once durable.

import (
	"bytes"
	"context"
	"encoding/json"
	"time"

	"github.com/rewind-engine/rewind/dataflow/report"
	"github.com/rewind-engine/rewind/dataflow/state"
	"github.com/rewind-engine/rewind/recordwise/checkpoint"
)

// partJob is a part handed from a task to its asynchronous writer.
type partJob struct {
	// inChan and outChan name the task's channels (traced runs).
	inChan, outChan []string
	ctx             context.Context
	task            checkpoint.TaskID
	chain           string
	sub             int
	ck              *pendingCk
	handedAt        time.Time
}

// writePart writes ck asynchronously and acknowledges it when durable.
func (inc *incarnation) writePart(t *task, ck *pendingCk, now time.Time) {
	j := partJob{ctx: t.ctx, task: t.id, chain: t.ch.name, sub: t.sub, ck: ck, handedAt: now, inChan: t.inChan, outChan: t.outChan}
	inc.wg.Add(1)
	go inc.partWriter(j)
}

func (inc *incarnation) partWriter(j partJob) {
	defer inc.wg.Done()
	ck := j.ck
	defer ck.release()
	start := time.Now()
	id := ck.id
	desc := partDesc{Version: layoutVersion, Task: string(j.task), Chain: j.chain, Subtask: j.sub,
		Checkpoint: uint64(id), Unaligned: ck.unaligned, Sources: ck.sources, InputWatermarks: ck.inWM,
		OutputWatermark: ck.outWM}
	var stateBytes, inFlightBytes, inFlightRecords int64
	written := 0
	ctx, cancel := context.WithCancel(j.ctx)
	defer cancel()
	defer context.AfterFunc(inc.checkpointCtx(id), cancel)()
	put := func(key string, data []byte) bool {
		if ctx.Err() != nil || inc.isAbandoned(id) {
			return false // a dead worker or an abandoned checkpoint starts no write
		}
		if err := inc.storeOnce.Put(ctx, inc.prefix+key, data); err != nil {
			if ctx.Err() == nil {
				inc.coord.decline(id, j.task, "writing part: "+err.Error())
			}
			return false
		}
		written++
		if written == 1 {
			if err := inc.reach(PointMidPartWrite, j.sub, j.task); err != nil {
				inc.fail(err, j.task)
				return false
			}
		}
		return true
	}
	for i, o := range ck.ops {
		key := opStateKey(id, j.task, o.stage)
		n, ok := 0, false
		// EncodeAllTo releases the snapshot as it encodes it, so the
		// snapshot and its blob together hold about one copy of the state.
		ck.ops[i].parts = nil
		if err := state.EncodeAllTo(string(j.task)+"/"+o.stage, o.parts, func(blob []byte) error {
			n, ok = len(blob), put(key, blob)
			return nil
		}); err != nil {
			inc.coord.decline(id, j.task, "encoding state: "+err.Error())
			return
		}
		if !ok {
			return
		}
		desc.Ops = append(desc.Ops, opObject{Stage: o.stage, Key: key, Bytes: int64(n), KeyGroups: len(o.parts)})
		stateBytes += int64(n)
	}
	var buf bytes.Buffer
	inc.dropInFlight(j.task, ck) // trace --teach only
	var streams []chanStream
	for _, ch := range sortedKeys(ck.inState) {
		streams = append(streams, chanStream{dir: dirInput, channel: ch, items: ck.inState[ch]})
	}
	for k, items := range ck.outState {
		if len(items) > 0 {
			streams = append(streams, chanStream{dir: dirOutput, channel: k, items: items})
		}
	}
	for _, s := range streams {
		for _, it := range s.items {
			if it.kind == kData {
				inFlightBytes += it.bytes()
				inFlightRecords += int64(it.rows())
			}
		}
	}
	if len(streams) > 0 {
		buf.Reset()
		if err := encodeChannels(&buf, streams); err != nil {
			inc.coord.decline(id, j.task, err.Error())
			return
		}
		key := channelsKey(id, j.task)
		if !put(key, buf.Bytes()) {
			return
		}
		desc.Channels = &objectRef{Key: key, Bytes: int64(buf.Len())}
		desc.InFlightRecords = inFlightRecords
	}
	data, err := json.Marshal(desc)
	if err != nil {
		inc.coord.decline(id, j.task, err.Error())
		return
	}
	if written == 0 {
		// Nothing but the descriptor: the crash point sits before it.
		if err := inc.reach(PointMidPartWrite, j.sub, j.task); err != nil {
			inc.fail(err, j.task)
			return
		}
		written = -1
	}
	if !put(partKey(id, j.task), data) {
		return
	}
	stateBytes += int64(len(data))
	if err := inc.reach(PointBeforeAck, j.sub, j.task); err != nil {
		inc.fail(err, j.task)
		return
	}
	if j.ctx.Err() != nil {
		return
	}
	if tr := inc.env.Trace; tr != nil {
		tracePart(tr, j, streams)
	}
	done := time.Now()
	m := TaskCheckpointStats{
		Task:                          string(j.task),
		StartDelayMs:                  report.Millis(ck.firstAt.Sub(ck.triggered)),
		AlignmentMs:                   report.Millis(ck.snapAt.Sub(ck.firstAt)),
		CollectMs:                     report.Millis(j.handedAt.Sub(ck.firstAt)),
		SyncMs:                        report.Millis(ck.sync),
		AsyncMs:                       report.Millis(done.Sub(start)),
		ProcessedDuringAlignmentBytes: ck.alignBytes,
		ProcessedDuringAlignmentRows:  ck.alignRecords,
		StateBytes:                    stateBytes,
		InFlightBytes:                 inFlightBytes,
		InFlightRecords:               inFlightRecords,
		Unaligned:                     ck.unaligned,
		TimedOut:                      ck.timedOut,
	}
	if ck.snapAt.Before(ck.firstAt) {
		m.AlignmentMs = 0
	}
	if ck.triggered.IsZero() {
		m.StartDelayMs = 0
	}
	inc.coord.ack(id, j.task, checkpoint.Part{Key: partKey(id, j.task), StateBytes: stateBytes,
		InFlightBytes: inFlightBytes, InFlightRecords: inFlightRecords, Durable: true}, m)
}

// stamp gives restored in-flight items a hand-over time: they are handed
// over again now.
func stamp(items []item, now time.Time) {
	for i := range items {
		items[i].born = now
		if items[i].kind == kData {
			items[i].births = []latEntry{{born: now, rows: int64(items[i].rows())}}
		}
	}
}
