package state

import (
	"bytes"
	"hash/crc32"
)

// castagnoli uses the CPU's CRC32 instruction where there is one.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// castagnoliPoly is the Castagnoli polynomial in crc32's bit order (the
// coefficient of x^0 in the top bit).
const castagnoliPoly = 0x82f63b78

// crcConcat returns the CRC32C of a followed by b, given crcA of a, crcB of
// b and the length of b. It lets the writer checksum the IPC section while
// it streams out, although the header before it (which holds the section's
// length) is only complete at the end.
//
// The CRC register is a polynomial over GF(2) and appending n bytes to a
// message multiplies the part contributed by a by x^(8n) modulo the
// polynomial; the pre- and post-inversion crc32 applies cancel out in the
// XOR, so crc(a||b) = crcA * x^(8n) + crcB.
func crcConcat(crcA, crcB uint32, lenB int) uint32 {
	return gf2MulMod(crcA, xPow8n(lenB)) ^ crcB
}

// gf2MulMod multiplies a and b modulo the Castagnoli polynomial, both in
// crc32's bit order.
func gf2MulMod(a, b uint32) uint32 {
	var p uint32
	for bit := uint32(1) << 31; bit != 0 && a != 0; bit >>= 1 {
		if a&bit != 0 {
			p ^= b
			a &^= bit
		}
		// b *= x
		if b&1 != 0 {
			b = b>>1 ^ castagnoliPoly
		} else {
			b >>= 1
		}
	}
	return p
}

// xPow8n returns x^(8n) modulo the Castagnoli polynomial, by squaring.
func xPow8n(n int) uint32 {
	result := uint32(1) << 31 // x^0
	sq := uint32(1) << 23     // x^8
	for ; n > 0; n >>= 1 {
		if n&1 != 0 {
			result = gf2MulMod(result, sq)
		}
		sq = gf2MulMod(sq, sq)
	}
	return result
}

// crcWriter appends to a buffer and keeps the CRC32C of what it appended.
// It checksums each write's bytes right after appending them, while they
// are still in the core's cache, instead of reading the whole output once
// more from memory at the end. (Checksumming the source before the copy
// measured slower.)
type crcWriter struct {
	dst *bytes.Buffer
	crc uint32
}

func (w *crcWriter) Write(p []byte) (int, error) {
	n, err := w.dst.Write(p)
	b := w.dst.Bytes()
	w.crc = crc32.Update(w.crc, castagnoli, b[len(b)-n:])
	return n, err
}
