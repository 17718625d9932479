package diskphase

// This file holds the materialised files that units exchange: encoding
// and publishing them through a bounded pipe of Puts, and fetching,
// checking and decoding them, with fileBadError for a file that is
// missing, corrupt or does not match its ledger entry.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/parquet-go/parquet-go/format"

	"github.com/rewind-engine/rewind/dataflow/storage"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// fileBadError reports an input file that is missing, fails its checksum or
// does not decode: the unit that produced it must run again.
type fileBadError struct {
	producer UnitID
	file     string
	reason   string
}

func (e *fileBadError) Error() string {
	return fmt.Sprintf("materialised file %s (made by %s) %s", e.file, e.producer, e.reason)
}

// putPipe overlaps encoding the next file with publishing earlier ones: at
// most maxInFlight Puts run at once. Encoding buffers come from
// encodeBufs and go back to it once their Put is done, so a unit does not
// fault in fresh memory for every file.
type putPipe struct {
	ctx     context.Context
	store   storage.Store
	done    chan error
	pending int
	err     error
}

// maxInFlight Puts overlap; more would only queue on the disk.
const maxInFlight = 2

// encodeBufs keeps the buffers of finished Puts for the next files. A
// sync.Pool, which this was, kept more of them than were ever in use at
// once: in the map phase of an unpaced keyed-count run, 45 to 49 MB of
// encoding buffers were live, where two units, each with maxInFlight Puts
// and a file being encoded, use 24 MB between them; and the peak RSS
// follows that heap. After a collection it kept none, so the next file
// cleared a fresh buffer of megabytes. This keeps at most maxInFlight
// spare buffers, for the life of the process (at most 32 MB).
var encodeBufs = &bufList{spare: make(chan *bytes.Buffer, maxInFlight)}

// maxSpareBuf is the largest buffer encodeBufs keeps: a chunk of 256 K
// rows of up to 7 columns fits (twice DefaultChunkRows).
const maxSpareBuf = 16 << 20

// bufList is a bounded free list of encoding buffers.
type bufList struct{ spare chan *bytes.Buffer }

// Get returns a kept buffer, or a new one.
func (l *bufList) Get() *bytes.Buffer {
	select {
	case b := <-l.spare:
		return b
	default:
		return new(bytes.Buffer)
	}
}

// Put keeps b for a later Get, unless enough are kept or b is too large.
func (l *bufList) Put(b *bytes.Buffer) {
	if b.Cap() > maxSpareBuf {
		return
	}
	select {
	case l.spare <- b:
	default:
	}
}

func newPutPipe(ctx context.Context, store storage.Store) *putPipe {
	return &putPipe{ctx: ctx, store: store, done: make(chan error, maxInFlight)}
}

// put publishes buf under name and returns buf to the pool afterwards.
func (p *putPipe) put(name string, buf *bytes.Buffer) error {
	for p.pending >= maxInFlight {
		p.collect()
	}
	if p.err != nil {
		encodeBufs.Put(buf)
		return p.err
	}
	p.pending++
	go func() {
		err := p.store.Put(p.ctx, name, buf.Bytes())
		buf.Reset()
		encodeBufs.Put(buf)
		p.done <- err
	}()
	return nil
}

func (p *putPipe) collect() {
	if err := <-p.done; err != nil && p.err == nil {
		p.err = err
	}
	p.pending--
}

// wait returns once every Put has finished, with the first error.
func (p *putPipe) wait() error {
	for p.pending > 0 {
		p.collect()
	}
	return p.err
}

// materialise encodes a table and hands it to the pipe.
func (a *attempt) materialise(pipe *putPipe, name string, names []string, cols [][]int64) (FileRef, error) {
	rows := 0
	if len(cols) > 0 {
		rows = len(cols[0])
	}
	if rows == 0 {
		return FileRef{}, nil
	}
	if err := pipe.ctx.Err(); err != nil {
		return FileRef{}, context.Cause(pipe.ctx)
	}
	buf := encodeBufs.Get()
	buf.Reset()
	codec, err := a.x.compression.codec()
	if err != nil {
		encodeBufs.Put(buf)
		return FileRef{}, err
	}
	buf.Grow(encodedBound(names, rows, codec.CompressionCodec() != format.Uncompressed))
	err = encodeTable(buf, names, cols, encodeOptions{compression: a.x.compression, midWrite: a.midWrite})
	if err != nil {
		encodeBufs.Put(buf)
		return FileRef{}, err
	}
	data := buf.Bytes()
	ref := FileRef{Name: name, Rows: int64(rows), Bytes: int64(len(data)), CRC: crc32.Checksum(data, castagnoli)}
	if err := pipe.put(name, buf); err != nil {
		return FileRef{}, err
	}
	a.x.met.materialised(a.unit.Job, int(ref.Bytes))
	return ref, nil
}

// fetch reads a materialised file and checks it against its ledger entry.
func (x *execution) fetch(ctx context.Context, ref FileRef, producer UnitID) ([]byte, error) {
	data, err := x.store.Get(ctx, ref.Name)
	switch {
	case errors.Is(err, storage.ErrNotFound):
		return nil, &fileBadError{producer: producer, file: ref.Name, reason: "is missing"}
	case errors.Is(err, storage.ErrCorrupt):
		return nil, &fileBadError{producer: producer, file: ref.Name, reason: "fails its checksum"}
	case err != nil:
		return nil, err
	}
	if int64(len(data)) != ref.Bytes || crc32.Checksum(data, castagnoli) != ref.CRC {
		return nil, &fileBadError{producer: producer, file: ref.Name, reason: "does not match its ledger entry"}
	}
	return data, nil
}

// decodeFile decodes a fetched file, turning malformed bytes into a
// fileBadError.
func decodeFile(data []byte, ref FileRef, producer UnitID, schema *arrow.Schema, x *execution, fn func(arrow.RecordBatch) error) (int64, error) {
	n, err := decodeTable(data, schema, x.env.Alloc, fn)
	if errors.Is(err, errBadTable) {
		return n, &fileBadError{producer: producer, file: ref.Name, reason: "does not decode: " + err.Error()}
	}
	if err == nil && n != ref.Rows {
		return n, &fileBadError{producer: producer, file: ref.Name, reason: fmt.Sprintf("holds %d rows, its ledger entry says %d", n, ref.Rows)}
	}
	return n, err
}
