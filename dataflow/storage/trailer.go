package storage

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// Every stored object is the payload followed by a fixed-size trailer:
//
//	payload | payload length (uint64 LE) | CRC32C of payload (uint32 LE) | magic (4 bytes)
//
// The trailer goes at the end so Put can stream the payload without copying
// it, and so a torn write (which loses the tail first) always loses the
// magic or the length check. Identical on every backend.
const trailerSize = 16

var trailerMagic = [4]byte{'R', 'W', 'D', '1'}

// castagnoli is hardware accelerated on amd64 and arm64.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

func makeTrailer(payload []byte) [trailerSize]byte {
	var t [trailerSize]byte
	binary.LittleEndian.PutUint64(t[0:8], uint64(len(payload)))
	binary.LittleEndian.PutUint32(t[8:12], crc32.Checksum(payload, castagnoli))
	copy(t[12:16], trailerMagic[:])
	return t
}

// payloadSize is the payload length implied by a stored size. Objects too
// short to hold a trailer report 0; Get will call them corrupt.
func payloadSize(stored int64) int64 {
	return max(stored-trailerSize, 0)
}

// verifyStored checks raw against its trailer and returns the payload,
// which aliases raw. The error wraps ErrCorrupt and says what is wrong;
// callers add the object name.
func verifyStored(raw []byte) ([]byte, error) {
	if len(raw) < trailerSize {
		return nil, fmt.Errorf("%w: %d bytes, too short for the %d-byte checksum trailer (truncated or written without Put)",
			ErrCorrupt, len(raw), trailerSize)
	}
	n := len(raw) - trailerSize
	t := raw[n:]
	if [4]byte(t[12:16]) != trailerMagic {
		return nil, fmt.Errorf("%w: no checksum trailer (bad magic %x; truncated or written without Put)", ErrCorrupt, t[12:16])
	}
	if want := binary.LittleEndian.Uint64(t[0:8]); want != uint64(n) {
		return nil, fmt.Errorf("%w: trailer records %d payload bytes, object holds %d", ErrCorrupt, want, n)
	}
	payload := raw[:n]
	want := binary.LittleEndian.Uint32(t[8:12])
	if got := crc32.Checksum(payload, castagnoli); got != want {
		return nil, fmt.Errorf("%w: CRC32C mismatch (trailer %08x, payload %08x)", ErrCorrupt, want, got)
	}
	return payload, nil
}
