package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// A schema or batch frame's payload is one Arrow IPC message:
//
//	metaLen  uint32   bytes of flatbuffer metadata
//	reserved uint32   0
//	meta     metaLen bytes, zero-padded to a multiple of 8
//	body     the message body (its buffers, as ipc lays them out)
//
// The padding keeps the body 8-byte aligned inside the receiver's buffer,
// so the decoded arrays point into it without a copy (and without a
// misaligned int64 view, which the race detector's pointer checks reject).
const ipcPrefix = 8

func pad8(n int) int { return (n + 7) &^ 7 }

var zeros [8]byte

// payloadWriter is the ipc.PayloadWriter of one sending channel: every
// message the ipc.Writer produces becomes one frame. The first is the
// schema.
type payloadWriter struct {
	send    func(kind Kind, n int, body func(io.Writer) error) error
	started bool
	prefix  [ipcPrefix]byte
}

func (p *payloadWriter) Start() error { return nil }
func (p *payloadWriter) Close() error { return nil }

func (p *payloadWriter) WritePayload(pl ipc.Payload) error {
	meta := pl.Meta()
	defer meta.Release()
	m := meta.Bytes()
	bodyLen, err := bodyLength(meta)
	if err != nil {
		return err
	}
	binary.LittleEndian.PutUint32(p.prefix[:4], uint32(len(m)))
	kind := KindBatch
	if !p.started {
		kind, p.started = KindSchema, true
	}
	// The body goes from the batch's buffers into the socket's buffer
	// without an intermediate copy: its length is in the metadata.
	n := ipcPrefix + pad8(len(m)) + bodyLen
	return p.send(kind, n, func(w io.Writer) error {
		for _, b := range [][]byte{p.prefix[:], m, zeros[:pad8(len(m))-len(m)]} {
			if _, err := w.Write(b); err != nil {
				return err
			}
		}
		return pl.SerializeBody(w)
	})
}

// bodyLength reads a message's body length from its own metadata.
func bodyLength(meta *memory.Buffer) (int, error) {
	empty := memory.NewBufferBytes(nil)
	msg := ipc.NewMessage(meta, empty)
	defer msg.Release()
	n := msg.BodyLen()
	if n < 0 || n > DefaultMaxFrame {
		return 0, fmt.Errorf("wire: IPC message body of %d bytes", n)
	}
	return int(n), nil
}

// decodeMessage turns a schema or batch frame's payload (held in buf, from
// the receiver's allocator) into an ipc message sharing buf. The caller
// keeps its reference to buf and releases it.
func decodeMessage(buf *memory.Buffer) (msg *ipc.Message, typ ipc.MessageType, err error) {
	b := buf.Bytes()
	if len(b) < ipcPrefix {
		return nil, 0, fmt.Errorf("%w: IPC payload of %d bytes is shorter than its prefix", ErrMalformed, len(b))
	}
	metaLen := int(binary.LittleEndian.Uint32(b[:4]))
	if binary.LittleEndian.Uint32(b[4:8]) != 0 {
		return nil, 0, fmt.Errorf("%w: IPC payload's reserved word is not 0", ErrMalformed)
	}
	if metaLen == 0 || pad8(metaLen) > len(b)-ipcPrefix {
		return nil, 0, fmt.Errorf("%w: IPC metadata of %d bytes in a %d-byte payload", ErrMalformed, metaLen, len(b))
	}
	bodyAt := ipcPrefix + pad8(metaLen)
	meta := memory.SliceBuffer(buf, ipcPrefix, metaLen)
	body := memory.SliceBuffer(buf, bodyAt, len(b)-bodyAt)
	defer meta.Release()
	defer body.Release()
	// The flatbuffer accessors index into the metadata without bounds
	// checks of their own: damaged metadata is a panic, turned here into
	// the error it is.
	defer func() {
		if r := recover(); r != nil {
			if msg != nil {
				msg.Release()
			}
			msg, err = nil, fmt.Errorf("%w: IPC metadata unreadable: %v", ErrMalformed, r)
		}
	}()
	msg = ipc.NewMessage(meta, body)
	if v := msg.Version(); v < ipc.MetadataV4 || v > ipc.MetadataV5 {
		msg.Release()
		return nil, 0, fmt.Errorf("%w: IPC metadata version %d", ErrMalformed, v)
	}
	if bl := msg.BodyLen(); bl != int64(len(b)-bodyAt) {
		msg.Release()
		return nil, 0, fmt.Errorf("%w: IPC message says %d body bytes, frame holds %d", ErrMalformed, bl, len(b)-bodyAt)
	}
	return msg, msg.Type(), nil
}

// errNoMessage is what the message feed says when the ipc reader asks for
// a message the frames have not delivered: one frame is one message, so
// this is a broken stream, never a wait.
var errNoMessage = errors.New("wire: IPC reader asked for a message no frame delivered")

// messageFeed is the ipc.MessageReader of one receiving channel. The
// channel's frame handler puts exactly one message in and asks the
// reader to decode it; the feed owns the message until the next one, as
// ipc's own stream reader does.
type messageFeed struct {
	next, cur *ipc.Message
}

func (f *messageFeed) Message() (*ipc.Message, error) {
	if f.cur != nil {
		f.cur.Release()
		f.cur = nil
	}
	if f.next == nil {
		return nil, errNoMessage
	}
	f.cur, f.next = f.next, nil
	return f.cur, nil
}

func (f *messageFeed) Retain() {}

func (f *messageFeed) Release() {
	for _, m := range []*ipc.Message{f.next, f.cur} {
		if m != nil {
			m.Release()
		}
	}
	f.next, f.cur = nil, nil
}

// batchDecoder decodes the messages of one receiving channel.
type batchDecoder struct {
	alloc  memory.Allocator
	feed   messageFeed
	reader *ipc.Reader
	schema *arrow.Schema // expected, if the receiver was told
}

// schemaMessage reads the channel's schema.
func (d *batchDecoder) schemaMessage(msg *ipc.Message, typ ipc.MessageType) error {
	if d.reader != nil {
		msg.Release()
		return fmt.Errorf("%w: a second schema on one channel", ErrMalformed)
	}
	if typ != ipc.MessageSchema {
		msg.Release()
		return fmt.Errorf("%w: schema frame holds a %s message", ErrMalformed, typ)
	}
	d.feed.next = msg
	opts := []ipc.Option{ipc.WithAllocator(d.alloc)}
	if d.schema != nil {
		opts = append(opts, ipc.WithSchema(d.schema))
	}
	r, err := ipc.NewReaderFromMessageReader(&d.feed, opts...)
	if err != nil {
		return fmt.Errorf("%w: schema: %v", ErrMalformed, err)
	}
	d.reader = r
	return nil
}

// batchMessage decodes one record batch; the caller owns the result.
func (d *batchDecoder) batchMessage(msg *ipc.Message, typ ipc.MessageType) (arrow.RecordBatch, error) {
	if d.reader == nil {
		msg.Release()
		return nil, fmt.Errorf("%w: batch before the channel's schema", ErrMalformed)
	}
	if typ != ipc.MessageRecordBatch {
		msg.Release()
		return nil, fmt.Errorf("%w: batch frame holds a %s message", ErrMalformed, typ)
	}
	d.feed.next = msg
	if !d.reader.Next() {
		err := d.reader.Err()
		if err == nil {
			err = errNoMessage
		}
		return nil, fmt.Errorf("%w: record batch: %v", ErrMalformed, err)
	}
	rec := d.reader.RecordBatch()
	if err := validateBatch(rec); err != nil {
		return nil, err
	}
	rec.Retain()
	return rec, nil
}

// validateBatch checks the decoded arrays against their own lengths, so
// a damaged but well-framed message cannot hand an operator an array
// that reads past its buffers.
func validateBatch(rec arrow.RecordBatch) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: record batch invalid: %v", ErrMalformed, r)
		}
	}()
	for i, col := range rec.Columns() {
		if int64(col.Len()) != rec.NumRows() {
			return fmt.Errorf("%w: column %d has %d rows, the batch %d", ErrMalformed, i, col.Len(), rec.NumRows())
		}
		if err := validateArray(col); err != nil {
			return fmt.Errorf("%w: column %d: %v", ErrMalformed, i, err)
		}
	}
	return nil
}

func (d *batchDecoder) release() {
	if d.reader != nil {
		d.reader.Release()
		d.reader = nil
	}
	d.feed.Release()
}
