package recordwise

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/rewind-engine/rewind/dataflow/fault"
	"github.com/rewind-engine/rewind/dataflow/operator"
	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/state"
	"github.com/rewind-engine/rewind/dataflow/storage"
	"github.com/rewind-engine/rewind/recordwise/checkpoint"
)

// restoredPoint is a recovery point read back from durable storage: the
// only thing a new incarnation starts from besides the re-opened sources.
type restoredPoint struct {
	found bool
	id    checkpoint.ID
	meta  metadata
	parts map[checkpoint.TaskID]*loadedPart
	// opStates holds every key group of every stateful stage, whatever
	// subtask saved it, so each new subtask takes the groups it owns.
	opStates map[string][]operator.KeyGroupState
	// sources maps input -> partition -> saved position and event time.
	sources map[string]map[string]partitionState
	// rescaled: the point was taken at another parallelism. Its parts do
	// not map onto the new tasks; operator state moves by key group,
	// source positions by partition, and each chain's tasks start from the
	// lowest watermarks its old tasks had (chainWM).
	rescaled bool
	chainWM  map[string]chainWatermarks
	// bytes is what the restore read from storage (metadata, part
	// descriptors, state and in-flight data), for the bill's restore_bytes.
	bytes int64
}

// chainWatermarks are the lowest watermarks the tasks of one chain saved:
// a rescaled task does not know which of them applied to its channels, and
// a watermark restored too low only delays event time (the window and join
// operators keep their own per-key-group watermark in their state).
type chainWatermarks struct {
	in, out int64
}

// noteWatermarks lowers the chain's watermarks to those of one saved part.
func (rp *restoredPoint) noteWatermarks(d partDesc) {
	w, ok := rp.chainWM[d.Chain]
	if !ok {
		w = chainWatermarks{in: d.OutputWatermark, out: d.OutputWatermark}
		if len(d.InputWatermarks) > 0 {
			w.in = d.InputWatermarks[0]
		}
	}
	for _, x := range d.InputWatermarks {
		w.in = min(w.in, x)
	}
	w.out = min(w.out, d.OutputWatermark)
	rp.chainWM[d.Chain] = w
}

type loadedPart struct {
	desc partDesc
	in   map[int][]item // input channel state, by channel
	out  map[int][]item // output channel state, by output channel
}

// release frees what the restore still holds (state batches are copied
// into the operators by Restore; in-flight items were moved into channels).
func (rp *restoredPoint) release() {
	if rp == nil {
		return
	}
	for _, parts := range rp.opStates {
		operator.ReleaseStates(parts)
	}
	rp.opStates = nil
	for _, lp := range rp.parts {
		for _, its := range lp.in {
			for _, it := range its {
				it.release()
			}
		}
		for _, its := range lp.out {
			for _, it := range its {
				it.release()
			}
		}
		lp.in, lp.out = nil, nil
	}
}

// listCheckpoints sorts what storage holds for the run into the two kinds
// of checkpoint there can be.
// It also counts the part descriptors of each checkpoint.
func listCheckpoints(ctx context.Context, store storage.Store, prefix string) (checkpoint.Listing, map[checkpoint.ID]int, error) {
	objs, err := store.List(ctx, prefix+chkDirPrefix)
	if err != nil {
		return checkpoint.Listing{}, nil, err
	}
	var l checkpoint.Listing
	seen := map[checkpoint.ID]bool{}
	meta := map[checkpoint.ID]bool{}
	parts := map[checkpoint.ID]int{}
	for _, o := range objs {
		id, rest, ok := parseChkName(strings.TrimPrefix(o.Name, prefix))
		if !ok {
			continue
		}
		if rest == metadataName {
			meta[id] = true
		}
		if strings.HasSuffix(rest, "/"+partName) {
			parts[id]++
		}
		seen[id] = true
	}
	for id := range seen {
		if meta[id] {
			l.WithMetadata = append(l.WithMetadata, id)
		} else {
			l.PartsOnly = append(l.PartsOnly, id)
		}
	}
	slices.Sort(l.WithMetadata)
	slices.Sort(l.PartsOnly)
	return l, parts, nil
}

// deleteCheckpoint removes every object of checkpoint id: the metadata
// first, so a crash half-way leaves parts without metadata (never restored)
// rather than metadata naming missing parts.
func deleteCheckpoint(ctx context.Context, store storage.Store, prefix string, id checkpoint.ID) error {
	dir := prefix + chkDir(id)
	if err := store.Delete(ctx, dir+metadataName); err != nil {
		return err
	}
	objs, err := store.List(ctx, dir)
	if err != nil {
		return err
	}
	for _, o := range objs {
		if err := store.Delete(ctx, o.Name); err != nil {
			return err
		}
	}
	return nil
}

// restore chooses and reads the recovery point to resume from: the newest
// one with metadata, falling back to older complete ones if it cannot be
// read. Checkpoints with parts but no metadata are deleted first: nothing
// can complete them any more.
func (inc *incarnation) restore(ctx context.Context) (*restoredPoint, checkpoint.RestorePlan, error) {
	store := inc.patient.Store()
	listing, parts, err := listCheckpoints(ctx, store, inc.prefix)
	if err != nil {
		return nil, checkpoint.RestorePlan{}, fmt.Errorf("listing recovery points: %w", err)
	}
	plan := checkpoint.Restore(listing)
	inc.listing, inc.rplan, inc.partCounts = listing, plan, parts
	if h := inc.opts.hooks.onRestore; h != nil {
		h(inc.env.Store, inc.prefix, listing, plan)
	}
	if inc.restoresParts(plan) { // trace --teach only
		rp, err := inc.restorePartial(ctx, listing, plan)
		return rp, plan, err
	}
	for _, id := range plan.Discard {
		if err := deleteCheckpoint(ctx, store, inc.prefix, id); err != nil {
			return nil, plan, fmt.Errorf("discarding incomplete checkpoint %d: %w", id, err)
		}
	}
	if !plan.Found {
		return &restoredPoint{}, plan, nil
	}
	candidates := append([]checkpoint.ID{plan.From}, plan.Fallbacks...)
	var errs []string
	for _, id := range candidates {
		rp, err := inc.load(ctx, id)
		if err == nil {
			if id != plan.From {
				inc.obs.note(fmt.Sprintf("recovery point %d could not be read (%s); resumed from %d", plan.From, errs[0], id))
			}
			if rp.rescaled {
				inc.obs.note(fmt.Sprintf("recovery point %d was taken at parallelism %d; restored at %d, its key groups re-assigned",
					id, rp.meta.Parallelism, inc.plan.parallelism))
			}
			inc.forgetState(rp) // trace --teach only
			return rp, plan, nil
		}
		if _, ok := fault.AsCrash(err); ok || ctx.Err() != nil || errors.As(err, new(run.RefusedError)) ||
			errors.Is(err, storage.ErrUnreachable) {
			// An in-flight refusal is not an unreadable point: an older
			// one would restore, but from further back than the newest
			// good point, and the note would call that one unreadable.
			// Nor is storage that does not answer (the wait already
			// reached the run's limit).
			return nil, plan, err
		}
		errs = append(errs, fmt.Sprintf("%d: %v", id, err))
	}
	return nil, plan, fmt.Errorf("no complete recovery point could be read: %s", strings.Join(errs, "; "))
}

// load reads recovery point id whole, or fails without keeping anything.
func (inc *incarnation) load(ctx context.Context, id checkpoint.ID) (rp *restoredPoint, err error) {
	store := inc.patient.Store()
	rp = &restoredPoint{found: true, id: id, parts: map[checkpoint.TaskID]*loadedPart{},
		opStates: map[string][]operator.KeyGroupState{}, sources: map[string]map[string]partitionState{}}
	defer func() {
		if err != nil {
			rp.release()
			rp = nil
		}
	}()
	data, err := store.Get(ctx, inc.prefix+metadataKey(id))
	rp.bytes += int64(len(data))
	if err != nil {
		return rp, fmt.Errorf("metadata: %w", err)
	}
	if err := json.Unmarshal(data, &rp.meta); err != nil {
		return rp, fmt.Errorf("metadata: %w", err)
	}
	m := &rp.meta
	switch {
	case m.Version != layoutVersion:
		return rp, fmt.Errorf("metadata version %d, this build reads %d", m.Version, layoutVersion)
	case m.Checkpoint != uint64(id):
		return rp, fmt.Errorf("metadata names checkpoint %d", m.Checkpoint)
	case m.Parallelism < 1:
		return rp, fmt.Errorf("metadata names parallelism %d", m.Parallelism)
	case m.Parallelism != inc.plan.parallelism:
		var inFlight, inFlightRecords int64
		for _, mp := range m.Parts {
			inFlight += mp.InFlightBytes
			inFlightRecords += mp.InFlightRecords
		}
		if inFlight > 0 || inFlightRecords > 0 {
			// A refusal stops the restore rather than fall back to an
			// older point (see restore).
			return rp, run.RefusedError{Err: fmt.Errorf("recovery point %d was taken at parallelism %d, the job runs at %d: it holds %d bytes of in-flight data (unaligned barriers), which belongs to channels between subtasks and cannot be re-assigned; restore at parallelism %d",
				id, m.Parallelism, inc.plan.parallelism, inFlight, m.Parallelism)}
		}
		rp.rescaled = true
		rp.chainWM = map[string]chainWatermarks{}
	}
	if err := checkReplayed(m.Replayed, id); err != nil {
		return rp, fmt.Errorf("metadata: %w", err)
	}
	if err := inc.env.Faults.Point(PointMidRestore, fault.Coordinator); err != nil {
		return rp, err
	}
	for _, mp := range m.Parts {
		if !rp.rescaled && !inc.restoresTask(checkpoint.TaskID(mp.Task)) {
			continue // another worker process's task: that process loads it
		}
		if err := inc.loadPart(ctx, rp, id, checkpoint.TaskID(mp.Task), mp.Key); err != nil {
			return rp, err
		}
	}
	return rp, nil
}

// restoresTask says this process builds task from the point: every task,
// but in a worker process only those placed on it. (A rescaled point is
// loaded whole: its key groups move between subtasks.)
func (inc *incarnation) restoresTask(task checkpoint.TaskID) bool {
	if inc.side == nil {
		return true
	}
	for _, c := range inc.plan.chains {
		for sub := range inc.plan.parallelism {
			if taskLane(c, sub) == string(task) {
				return inc.runsHere(sub)
			}
		}
	}
	return false
}

// loadPart reads task's part of checkpoint id (its descriptor at key, its
// operator state, source positions and in-flight data) into rp.
func (inc *incarnation) loadPart(ctx context.Context, rp *restoredPoint, id checkpoint.ID, task checkpoint.TaskID, key string) error {
	store := inc.patient.Store()
	lp := &loadedPart{}
	data, err := store.Get(ctx, inc.prefix+key)
	rp.bytes += int64(len(data))
	if err != nil {
		return fmt.Errorf("part of %s: %w", task, err)
	}
	if err := json.Unmarshal(data, &lp.desc); err != nil {
		return fmt.Errorf("part of %s: %w", task, err)
	}
	if lp.desc.Version != layoutVersion || lp.desc.Task != string(task) || lp.desc.Checkpoint != uint64(id) {
		return fmt.Errorf("part of %s does not belong to checkpoint %d", task, id)
	}
	rp.parts[task] = lp
	if rp.rescaled {
		rp.noteWatermarks(lp.desc)
	}
	for _, o := range lp.desc.Ops {
		data, err := store.Get(ctx, inc.prefix+o.Key)
		rp.bytes += int64(len(data))
		if err != nil {
			return fmt.Errorf("state of %s in %s: %w", o.Stage, task, err)
		}
		// Shared: the batches point into data, read for this restore
		// alone, instead of a second copy of the state beside it.
		_, parts, err := state.DecodeAllShared(data)
		if err != nil {
			return fmt.Errorf("state of %s in %s: %w", o.Stage, task, err)
		}
		rp.opStates[o.Stage] = append(rp.opStates[o.Stage], parts...)
	}
	for _, s := range lp.desc.Sources {
		if rp.sources[s.Input] == nil {
			rp.sources[s.Input] = map[string]partitionState{}
		}
		rp.sources[s.Input][s.Partition] = s
	}
	if lp.desc.Channels != nil {
		data, err := store.Get(ctx, inc.prefix+lp.desc.Channels.Key)
		rp.bytes += int64(len(data))
		if err != nil {
			return fmt.Errorf("in-flight data of %s: %w", task, err)
		}
		streams, err := decodeChannels(data, inc.env.Alloc)
		if err != nil {
			return fmt.Errorf("in-flight data of %s: %w", task, err)
		}
		lp.in, lp.out = map[int][]item{}, map[int][]item{}
		for _, s := range streams {
			if s.dir == dirInput {
				lp.in[s.channel] = append(lp.in[s.channel], s.items...)
			} else {
				lp.out[s.channel] = append(lp.out[s.channel], s.items...)
			}
		}
	}
	return nil
}
