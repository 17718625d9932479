package wire

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// Kind says what a frame carries.
type Kind uint8

// The frame kinds. Their numbers are part of the format: never renumber.
const (
	// KindHello opens a connection: the dialer's Hello, JSON.
	KindHello Kind = 1
	// KindWelcome accepts a Hello: the listener's Welcome, JSON.
	KindWelcome Kind = 2
	// KindRefused turns a Hello away: the reason as text. The listener
	// closes the connection after sending it.
	KindRefused Kind = 3
	// KindControl is one control message (plan, ack, commit...), opaque to
	// this package: the payload is the caller's.
	KindControl Kind = 4
	// KindHeartbeat is a liveness beat: sequence number and send time.
	KindHeartbeat Kind = 5
	// KindSchema opens a data channel: the Arrow IPC schema message.
	KindSchema Kind = 6
	// KindBatch is one Arrow IPC record batch message on a data channel.
	KindBatch Kind = 7
	// KindBarrier is a barrier on a data channel, in its place between
	// batches: the caller's payload.
	KindBarrier Kind = 8
	// KindCredit grants the sender of a data channel room for more
	// batches: a uint32 count.
	KindCredit Kind = 9
	// KindEnd closes a data channel: no more batches or barriers follow.
	KindEnd Kind = 10
	// KindKill asks the peer to end its own process at once, as a SIGKILL
	// from outside would: how a coordinator kills a worker it did not
	// start (one started by hand or by a scheduler). Empty payload. Only a
	// side with Options.OnKill takes it; anywhere else it is malformed.
	KindKill Kind = 11
	// KindClose says the sender is closing the connection on purpose
	// (Conn.Close: the run is over), so the end that follows is not a
	// death. Empty payload. Without it the two look alike: a process that
	// dies has its sockets closed by the kernel just the same.
	KindClose Kind = 12
)

func (k Kind) String() string {
	switch k {
	case KindHello:
		return "hello"
	case KindWelcome:
		return "welcome"
	case KindRefused:
		return "refused"
	case KindControl:
		return "control"
	case KindHeartbeat:
		return "heartbeat"
	case KindSchema:
		return "schema"
	case KindBatch:
		return "batch"
	case KindBarrier:
		return "barrier"
	case KindCredit:
		return "credit"
	case KindEnd:
		return "end"
	case KindKill:
		return "kill"
	case KindClose:
		return "close"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

func (k Kind) valid() bool { return k >= KindHello && k <= KindClose }

// A frame is a 12-byte header, the payload, and a 4-byte trailer, all
// little-endian:
//
//	magic    2 bytes  "RW"
//	kind     1 byte
//	version  1 byte   FrameVersion
//	channel  uint32   data channel (0 for connection-level frames)
//	length   uint32   payload bytes
//	payload  length bytes
//	crc      uint32   CRC32C of the payload
//
// The checksum trails the payload so a batch's body can be streamed into
// the socket's buffer as it is serialised, without a copy to checksum it
// first. A damaged header shows up as a bad magic, kind, version or
// length, or as a payload whose checksum does not match.
const (
	headerLen  = 12
	trailerLen = 4
)

// FrameVersion is the version byte of every frame this build writes and
// the only one it reads.
const FrameVersion = 1

// DefaultMaxFrame bounds a frame's payload. A length above the reader's
// bound is refused before anything is allocated, so a stranger cannot
// make a process allocate gigabytes with one header.
const DefaultMaxFrame = 64 << 20

var magic = [2]byte{'R', 'W'}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// ErrMalformed is wrapped by every error about a frame that is not one:
// the peer is broken or hostile, and the connection is to be closed.
var ErrMalformed = errors.New("malformed frame")

// Header is a decoded frame header.
type Header struct {
	Kind    Kind
	Channel uint32
	Length  uint32
}

func putHeader(b []byte, h Header) {
	b[0], b[1] = magic[0], magic[1]
	b[2] = byte(h.Kind)
	b[3] = FrameVersion
	binary.LittleEndian.PutUint32(b[4:], h.Channel)
	binary.LittleEndian.PutUint32(b[8:], h.Length)
}

// parseHeader checks everything a header alone can say.
func parseHeader(b []byte, maxFrame int) (Header, error) {
	if b[0] != magic[0] || b[1] != magic[1] {
		return Header{}, fmt.Errorf("%w: bad magic %q", ErrMalformed, b[:2])
	}
	if b[3] != FrameVersion {
		return Header{}, fmt.Errorf("%w: frame version %d, this build reads %d", ErrMalformed, b[3], FrameVersion)
	}
	h := Header{
		Kind:    Kind(b[2]),
		Channel: binary.LittleEndian.Uint32(b[4:]),
		Length:  binary.LittleEndian.Uint32(b[8:]),
	}
	if !h.Kind.valid() {
		return Header{}, fmt.Errorf("%w: unknown kind %d", ErrMalformed, b[2])
	}
	if int64(h.Length) > int64(maxFrame) {
		return Header{}, fmt.Errorf("%w: %s frame of %d bytes, more than the %d allowed", ErrMalformed, h.Kind, h.Length, maxFrame)
	}
	return h, nil
}

// Writer writes frames to a buffered stream. It is not safe for
// concurrent use; Conn serialises its callers.
type Writer struct {
	bw  *bufio.Writer
	hdr [headerLen]byte
	crc crcWriter
}

// NewWriter writes frames to w, buffered.
func NewWriter(w io.Writer) *Writer {
	wr := &Writer{bw: bufio.NewWriterSize(w, 256<<10)}
	wr.crc.w = wr.bw
	return wr
}

// Write writes one frame whose payload is the concatenation of parts
// (so a batch's metadata and body need not be copied together first).
// Nothing reaches the stream until Flush, or until the buffer fills.
func (w *Writer) Write(kind Kind, channel uint32, parts ...[]byte) error {
	n, body := partsBody(parts)
	return w.WriteStreamed(kind, channel, n, body)
}

// partsBody is a payload made of parts: its length and its writer.
func partsBody(parts [][]byte) (int, func(io.Writer) error) {
	var n int
	for _, p := range parts {
		n += len(p)
	}
	return n, func(out io.Writer) error {
		for _, p := range parts {
			if _, err := out.Write(p); err != nil {
				return err
			}
		}
		return nil
	}
}

// WriteStreamed writes one frame of n payload bytes that body writes.
// Writing other than n bytes is an error, and the stream is then broken:
// the caller closes it.
func (w *Writer) WriteStreamed(kind Kind, channel uint32, n int, body func(io.Writer) error) error {
	if n > DefaultMaxFrame {
		return fmt.Errorf("wire: %s frame of %d bytes is more than the %d allowed", kind, n, DefaultMaxFrame)
	}
	putHeader(w.hdr[:], Header{Kind: kind, Channel: channel, Length: uint32(n)})
	if _, err := w.bw.Write(w.hdr[:]); err != nil {
		return err
	}
	w.crc.sum, w.crc.n = 0, 0
	if err := body(&w.crc); err != nil {
		return err
	}
	if w.crc.n != n {
		return fmt.Errorf("wire: %s frame declared %d payload bytes and wrote %d", kind, n, w.crc.n)
	}
	var t [trailerLen]byte
	binary.LittleEndian.PutUint32(t[:], w.crc.sum)
	_, err := w.bw.Write(t[:])
	return err
}

// Flush sends what is buffered.
func (w *Writer) Flush() error { return w.bw.Flush() }

// crcWriter checksums and counts what passes through it.
type crcWriter struct {
	w   io.Writer
	sum uint32
	n   int
}

func (c *crcWriter) Write(p []byte) (int, error) {
	c.sum = crc32.Update(c.sum, castagnoli, p)
	n, err := c.w.Write(p)
	c.n += n
	return n, err
}

// Reader reads frames from a buffered stream. Next returns the header;
// the payload is then read with Payload or ReadPayloadInto before the
// next call to Next.
type Reader struct {
	br       *bufio.Reader
	maxFrame int
	hdr      [headerLen]byte
	pending  *Header // header whose payload is not read yet
}

// NewReader reads frames from r with payloads of at most maxFrame bytes
// (DefaultMaxFrame when maxFrame ≤ 0).
func NewReader(r io.Reader, maxFrame int) *Reader {
	if maxFrame <= 0 {
		maxFrame = DefaultMaxFrame
	}
	return &Reader{br: bufio.NewReaderSize(r, 256<<10), maxFrame: maxFrame}
}

// Next reads the next frame's header. io.EOF means the stream ended
// cleanly between frames; a stream that ends inside a frame is
// ErrMalformed (truncated).
func (r *Reader) Next() (Header, error) {
	if r.pending != nil {
		return Header{}, errors.New("wire: Next before the previous frame's payload was read")
	}
	n, err := io.ReadFull(r.br, r.hdr[:])
	if err != nil {
		if err == io.EOF {
			return Header{}, io.EOF
		}
		if err == io.ErrUnexpectedEOF {
			return Header{}, fmt.Errorf("%w: truncated header (%d of %d bytes)", ErrMalformed, n, headerLen)
		}
		return Header{}, err
	}
	h, err := parseHeader(r.hdr[:], r.maxFrame)
	if err != nil {
		return Header{}, err
	}
	r.pending = &h
	return h, nil
}

// Payload reads the pending frame's payload into a new slice and checks
// it.
func (r *Reader) Payload() ([]byte, error) {
	if r.pending == nil {
		return nil, errors.New("wire: Payload without a pending frame")
	}
	b := make([]byte, r.pending.Length)
	if err := r.ReadPayloadInto(b); err != nil {
		return nil, err
	}
	return b, nil
}

// ReadPayloadInto reads the pending frame's payload into dst, which must
// be exactly its length, and checks its checksum.
func (r *Reader) ReadPayloadInto(dst []byte) error {
	h := r.pending
	if h == nil {
		return errors.New("wire: payload read without a pending frame")
	}
	r.pending = nil
	if len(dst) != int(h.Length) {
		return fmt.Errorf("wire: payload buffer of %d bytes for a %d-byte frame", len(dst), h.Length)
	}
	if n, err := io.ReadFull(r.br, dst); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return fmt.Errorf("%w: truncated %s payload (%d of %d bytes)", ErrMalformed, h.Kind, n, h.Length)
		}
		return err
	}
	var t [trailerLen]byte
	if _, err := io.ReadFull(r.br, t[:]); err != nil {
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return fmt.Errorf("%w: truncated %s frame (no checksum)", ErrMalformed, h.Kind)
		}
		return err
	}
	if got, want := crc32.Checksum(dst, castagnoli), binary.LittleEndian.Uint32(t[:]); got != want {
		return fmt.Errorf("%w: %s payload checksum %08x, frame says %08x", ErrMalformed, h.Kind, got, want)
	}
	return nil
}

// withMax changes the payload bound (after the handshake's small one).
func (r *Reader) withMax(maxFrame int) *Reader {
	if maxFrame <= 0 {
		maxFrame = DefaultMaxFrame
	}
	r.maxFrame = maxFrame
	return r
}
