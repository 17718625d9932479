package bench

import (
	"context"
	"time"

	"github.com/rewind-engine/rewind/dataflow/inspect"
	"github.com/rewind-engine/rewind/dataflow/run"
	"github.com/rewind-engine/rewind/dataflow/storage"
)

// storageFigures are what a finished run left in its storage.
type storageFigures struct {
	// points counts complete recovery points; largestBytes is the size of
	// the largest (a windowed job's last points hold only open windows).
	points       int
	largestBytes int64
	// readBytes were read back, every object once, at readMBps.
	readBytes int64
	readMBps  float64
}

// readStorage lists the storage at url, finds exec's recovery points in
// the listing (when exec can read its layout) and reads every object once
// as stored (no checksum work where the store allows), timed: the
// bandwidth a restore from this storage could at best reach.
func readStorage(ctx context.Context, url string, exec run.Executor) (storageFigures, error) {
	var f storageFigures
	st, err := storage.Open(ctx, url, storage.Options{})
	if err != nil {
		return f, err
	}
	defer st.Close()
	objs, err := st.List(ctx, "")
	if err != nil {
		return f, err
	}
	if in, ok := exec.(inspect.Inspector); ok {
		for _, p := range in.RecoveryPoints(objs) {
			if p.Complete {
				f.points++
				f.largestBytes = max(f.largestBytes, p.Bytes)
			}
		}
	}
	get := st.Get
	if raw, ok := st.(storage.RawAccess); ok {
		get = raw.RawGet
	}
	start := time.Now()
	for _, o := range objs {
		b, err := get(ctx, o.Name)
		if err != nil {
			return f, err
		}
		f.readBytes += int64(len(b))
	}
	if d := time.Since(start); d > 0 && f.readBytes > 0 {
		f.readMBps = float64(f.readBytes) / 1e6 / d.Seconds()
	}
	return f, nil
}
