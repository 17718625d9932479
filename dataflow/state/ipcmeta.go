package state

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// checkMeta vets the flatbuffer metadata of one IPC message before
// arrow-go parses it. arrow-go sizes slices from vector lengths it reads
// without checking them against the buffer, and decompresses into buffers
// of whatever size a body claims, so one damaged field behind a matching
// checksum (a writer bug, a collision) could ask for gigabytes. State is
// written by EncodeAll only, so what is accepted is what it writes: a
// schema of flat Int fields, then uncompressed record batches; every
// vector must fit inside the metadata.
func checkMeta(meta []byte) error {
	fb := flatbuf(meta)
	root, err := fb.root()
	if err != nil {
		return err
	}
	const (
		msgHeaderType = 1
		msgHeader     = 2
		msgCustomMeta = 4
	)
	if _, err := fb.vector(root, msgCustomMeta, 4); err != nil {
		return err
	}
	kind, err := fb.u8(root, msgHeaderType)
	if err != nil {
		return err
	}
	hdr, ok, err := fb.table(root, msgHeader)
	if err != nil || !ok {
		return errors.Join(errors.New("message without header"), err)
	}
	switch kind {
	case 1: // Schema
		return fb.checkSchema(hdr)
	case 3: // RecordBatch
		return fb.checkRecordBatch(hdr)
	default:
		return fmt.Errorf("message type %d, state holds only a schema and record batches", kind)
	}
}

func (fb flatbuf) checkSchema(schema int) error {
	const (
		schemaFields     = 1
		schemaCustomMeta = 2
		schemaFeatures   = 3
		fieldTypeType    = 2
		fieldDictionary  = 4
		fieldChildren    = 5
		fieldCustomMeta  = 6
		typeInt          = 2
	)
	if _, err := fb.vector(schema, schemaCustomMeta, 4); err != nil {
		return err
	}
	if _, err := fb.vector(schema, schemaFeatures, 8); err != nil {
		return err
	}
	fields, err := fb.vector(schema, schemaFields, 4)
	if err != nil {
		return err
	}
	for i := range fields.n {
		f, err := fb.indirect(fields.at + 4*i)
		if err != nil {
			return err
		}
		if t, err := fb.u8(f, fieldTypeType); err != nil || t != typeInt {
			return errors.Join(fmt.Errorf("field %d has type %d, state columns are integers", i, t), err)
		}
		if _, ok, err := fb.table(f, fieldDictionary); err != nil || ok {
			return errors.Join(fmt.Errorf("field %d is dictionary encoded", i), err)
		}
		if c, err := fb.vector(f, fieldChildren, 4); err != nil || c.n != 0 {
			return errors.Join(fmt.Errorf("field %d has children", i), err)
		}
		if _, err := fb.vector(f, fieldCustomMeta, 4); err != nil {
			return err
		}
	}
	return nil
}

func (fb flatbuf) checkRecordBatch(rb int) error {
	const (
		rbNodes       = 1
		rbBuffers     = 2
		rbCompression = 3
		rbVariadic    = 4
	)
	if _, ok, err := fb.table(rb, rbCompression); err != nil || ok {
		return errors.Join(errors.New("compressed record batch"), err)
	}
	for _, v := range []struct{ slot, size int }{{rbNodes, 16}, {rbBuffers, 16}, {rbVariadic, 8}} {
		if _, err := fb.vector(rb, v.slot, v.size); err != nil {
			return err
		}
	}
	return nil
}

// flatbuf reads a flatbuffer with every offset checked against its length.
type flatbuf []byte

var errFlatbuf = errors.New("message metadata out of bounds")

func (fb flatbuf) u32(pos int) (int, error) {
	if pos < 0 || pos+4 > len(fb) {
		return 0, errFlatbuf
	}
	return int(binary.LittleEndian.Uint32(fb[pos:])), nil
}

func (fb flatbuf) root() (int, error) { return fb.indirect(0) }

// indirect follows the unsigned offset stored at pos.
func (fb flatbuf) indirect(pos int) (int, error) {
	off, err := fb.u32(pos)
	if err != nil || pos+off >= len(fb) {
		return 0, errFlatbuf
	}
	return pos + off, nil
}

// field returns the position of field slot of the table at pos, 0 when the
// field is absent.
func (fb flatbuf) field(pos, slot int) (int, error) {
	soff, err := fb.u32(pos)
	if err != nil {
		return 0, err
	}
	vt := pos - int(int32(soff))
	if vt < 0 || vt+4 > len(fb) {
		return 0, errFlatbuf
	}
	vtLen := int(binary.LittleEndian.Uint16(fb[vt:]))
	at := 4 + 2*slot
	if at+2 > vtLen {
		return 0, nil
	}
	if vt+at+2 > len(fb) {
		return 0, errFlatbuf
	}
	off := int(binary.LittleEndian.Uint16(fb[vt+at:]))
	if off == 0 {
		return 0, nil
	}
	if pos+off >= len(fb) {
		return 0, errFlatbuf
	}
	return pos + off, nil
}

func (fb flatbuf) u8(pos, slot int) (uint8, error) {
	f, err := fb.field(pos, slot)
	if err != nil || f == 0 {
		return 0, err
	}
	return fb[f], nil
}

func (fb flatbuf) table(pos, slot int) (int, bool, error) {
	f, err := fb.field(pos, slot)
	if err != nil || f == 0 {
		return 0, false, err
	}
	t, err := fb.indirect(f)
	return t, err == nil, err
}

type vec struct{ at, n int }

// vector returns the elements' position and count of vector field slot,
// checking that n elements of size bytes fit.
func (fb flatbuf) vector(pos, slot, size int) (vec, error) {
	f, err := fb.field(pos, slot)
	if err != nil || f == 0 {
		return vec{}, err
	}
	v, err := fb.indirect(f)
	if err != nil {
		return vec{}, err
	}
	n, err := fb.u32(v)
	if err != nil || uint64(v)+4+uint64(n)*uint64(size) > uint64(len(fb)) {
		return vec{}, errFlatbuf
	}
	return vec{at: v + 4, n: n}, nil
}

// CheckIPC vets a whole Arrow IPC stream held in data before arrow-go
// reads it: every message framed within data, its metadata accepted by
// checkMeta, its body inside data, and an end-of-stream marker last. It is
// for streams of flat integer batches read from durable storage (the
// state blob's IPC section, recordwise's channel state): arrow-go's own
// reader would allocate whatever lengths the bytes claim.
func CheckIPC(data []byte) error {
	off := 0
	for n := 0; ; n++ {
		rest := data[off:]
		if len(rest) < 8 || binary.LittleEndian.Uint32(rest) != ipcContinuation {
			return fmt.Errorf("IPC message %d: missing message header", n)
		}
		metaLen := int64(int32(binary.LittleEndian.Uint32(rest[4:])))
		if metaLen == 0 {
			if len(rest) != 8 {
				return fmt.Errorf("IPC stream: %d bytes after the end-of-stream marker", len(rest)-8)
			}
			return nil
		}
		if metaLen < 0 || metaLen > int64(len(rest)-8) {
			return fmt.Errorf("IPC message %d: metadata of %d bytes, %d left", n, metaLen, len(rest)-8)
		}
		meta := rest[8 : 8+metaLen]
		if err := checkMeta(meta); err != nil {
			return fmt.Errorf("IPC message %d: %w", n, err)
		}
		bodyLen, err := bodyLength(meta)
		if err != nil || bodyLen < 0 || bodyLen > int64(len(rest))-8-metaLen {
			return errors.Join(fmt.Errorf("IPC message %d: body of %d bytes, %d left", n, bodyLen, int64(len(rest))-8-metaLen), err)
		}
		off += int(8 + metaLen + bodyLen)
	}
}

// bodyLength reads Message.bodyLength (an int64, slot 3).
func bodyLength(meta []byte) (int64, error) {
	fb := flatbuf(meta)
	root, err := fb.root()
	if err != nil {
		return 0, err
	}
	f, err := fb.field(root, 3)
	if err != nil || f == 0 {
		return 0, err
	}
	if f+8 > len(fb) {
		return 0, errFlatbuf
	}
	return int64(binary.LittleEndian.Uint64(fb[f:])), nil
}
