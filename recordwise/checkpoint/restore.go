package checkpoint

import "slices"

// Listing is what the I/O loop found in durable shared storage after a
// crash, sorted into the only two kinds of checkpoint that can be there.
type Listing struct {
	// WithMetadata lists checkpoints whose metadata object exists. These,
	// and only these, are recovery points.
	WithMetadata []ID
	// PartsOnly lists checkpoints with at least one part but no metadata
	// object. That includes a checkpoint whose parts were all durable when
	// the crash hit, just before its metadata was written: "every part is
	// there" is not completeness, because nothing durable says which parts
	// belong together or that the coordinator accepted them. Such a
	// checkpoint is never restored; the previous complete one is.
	PartsOnly []ID
}

// RestorePlan is what to do with a Listing: restore From (if Found),
// discard Discard, and start the coordinator at NextID.
type RestorePlan struct {
	// From is the newest checkpoint with metadata; meaningful only when
	// Found. Without one the job starts from the beginning of its input.
	From  ID
	Found bool
	// Fallbacks are the older complete checkpoints, newest first, to try
	// in turn if From proves unreadable (a torn or corrupt file).
	Fallbacks []ID
	// Complete lists every checkpoint with metadata, ascending; pass it
	// as Config.Completed so retention keeps counting them.
	Complete []ID
	// Discard lists the checkpoints with parts but no metadata, ascending.
	// No coordinator is left that could still complete them, so the loop
	// deletes them (as for DiscardParts) before triggering anything new.
	Discard []ID
	// NextID is one past every checkpoint seen, complete or not, so a new
	// checkpoint never writes where an abandoned one left parts.
	NextID ID
}

// Restore chooses the recovery point to resume from: the newest checkpoint
// with metadata. A checkpoint listed in both fields has its metadata and is
// complete; its parts are not discarded.
func Restore(l Listing) RestorePlan {
	complete := slices.Clone(l.WithMetadata)
	slices.Sort(complete)
	complete = slices.Compact(complete)

	var discard []ID
	for _, id := range l.PartsOnly {
		if _, ok := slices.BinarySearch(complete, id); !ok {
			discard = append(discard, id)
		}
	}
	slices.Sort(discard)
	discard = slices.Compact(discard)

	plan := RestorePlan{Complete: complete, Discard: discard, NextID: 1}
	if n := len(complete); n > 0 {
		plan.From, plan.Found = complete[n-1], true
		for i := n - 2; i >= 0; i-- {
			plan.Fallbacks = append(plan.Fallbacks, complete[i])
		}
		plan.NextID = max(plan.NextID, complete[n-1]+1)
	}
	if n := len(discard); n > 0 {
		plan.NextID = max(plan.NextID, discard[n-1]+1)
	}
	return plan
}
