package recordwise

// A chain that ends in the sink holds its operators' output back while the
// sink's flush is in flight. The rows it would emit meanwhile could not
// become visible before that flush is done anyway: they would wait in the
// writer's buffer. Held in the operators instead, a key changed many times
// in the meantime is emitted once, with its newest value, when the flusher
// is free again, so a loaded sink task emits (and the sink encodes, writes
// and rolls) one row per changed key per flush instead of one per input
// batch. A lightly loaded one finds the flusher free and emits after every
// input as before. Nothing held back crosses a barrier, a watermark or the
// end of the input: flushChain emits it first.

// chainDone follows the chain's processing of one input: a chain ending in
// the sink defers its flush while the sink is busy; any other flushes now,
// so that its network buffers fill and time out as they always did.
func (t *task) chainDone() error {
	if t.snk == nil {
		return t.flushChain()
	}
	t.pendBirths = append(t.pendBirths, t.curBirths...)
	t.deferred = true
	return t.sinkReady()
}

// sinkReady emits the deferred output into the sink and hands it to the
// flusher when the flusher is free.
func (t *task) sinkReady() error {
	if !t.deferred {
		return nil
	}
	if err := t.snk.poll(); err != nil {
		return err
	}
	if t.snk.inflight {
		return nil // the flusher rings the task when it is done
	}
	if err := t.flushDeferred(); err != nil {
		return err
	}
	return t.snk.flushDue(t.ctx, t.now)
}

// flushDeferred flushes the chain's deferred output, attributing it to the
// hand-over times of the inputs it derives from.
func (t *task) flushDeferred() error {
	if !t.deferred {
		return nil
	}
	t.deferred = false
	cur := t.curBirths
	t.curBirths = t.pendBirths
	err := t.ops.Flush()
	t.curBirths = cur
	t.pendBirths = t.pendBirths[:0]
	return err
}
