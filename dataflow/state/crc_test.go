package state

import (
	"bytes"
	"hash/crc32"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/rewind-engine/rewind/dataflow/testseed"
)

// TestCRCConcatMatchesChecksum checks that joining the checksums of two
// pieces gives the checksum of the whole, for random pieces of every
// length class (empty, single byte, odd, several cache lines).
func TestCRCConcatMatchesChecksum(t *testing.T) {
	seed := testseed.Seed(t)
	r := rand.New(rand.NewPCG(seed, 0))
	for i := range 300 {
		a := make([]byte, []int{0, 1, 7, r.IntN(100), r.IntN(70_000)}[i%5])
		b := make([]byte, []int{0, 1, 13, r.IntN(100), r.IntN(70_000)}[(i/5)%5])
		for j := range a {
			a[j] = byte(r.Uint32())
		}
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		want := crc32.Checksum(append(append([]byte{}, a...), b...), castagnoli)
		got := crcConcat(crc32.Checksum(a, castagnoli), crc32.Checksum(b, castagnoli), len(b))
		if got != want {
			t.Fatalf("seed %d, case %d (%d+%d bytes): joined %08x, whole %08x", seed, i, len(a), len(b), got, want)
		}
	}
}

// TestCRCWriterChecksumsWhatItAppends checks crcWriter against one checksum
// of the bytes it appended, after a prefix it must not include.
func TestCRCWriterChecksumsWhatItAppends(t *testing.T) {
	seed := testseed.Seed(t)
	r := rand.New(rand.NewPCG(seed, 1))
	var dst bytes.Buffer
	dst.WriteString("prefix")
	w := crcWriter{dst: &dst}
	for range 50 {
		p := make([]byte, r.IntN(5000))
		for j := range p {
			p[j] = byte(r.Uint32())
		}
		if n, err := w.Write(p); n != len(p) || err != nil {
			t.Fatalf("seed %d: Write = %d, %v", seed, n, err)
		}
	}
	if want := crc32.Checksum(dst.Bytes()[len("prefix"):], castagnoli); w.crc != want {
		t.Fatalf("seed %d: crcWriter has %08x, the appended bytes %08x", seed, w.crc, want)
	}
}

// TestChecksumCopyInPieces checks the split checksum (and copy) against
// the plain one for lengths around the piece and chunk boundaries, on as
// many goroutines as the split allows.
func TestChecksumCopyInPieces(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	seed := testseed.Seed(t)
	r := rand.New(rand.NewPCG(seed, 2))
	src := make([]byte, 4*checksumPerGoroutine+3*copyChunk+17)
	for i := range src {
		src[i] = byte(r.Uint32())
	}
	for _, n := range []int{0, 1, copyChunk - 1, copyChunk + 1, 2*checksumPerGoroutine - 1,
		2 * checksumPerGoroutine, 3*checksumPerGoroutine + copyChunk/2, len(src)} {
		want := crc32.Checksum(src[:n], castagnoli)
		if got := checksumCopy(src[:n], nil); got != want {
			t.Fatalf("seed %d, %d bytes: checksum %08x, want %08x", seed, n, got, want)
		}
		dst := make([]byte, n)
		if got := checksumCopy(src[:n], dst); got != want || !bytes.Equal(dst, src[:n]) {
			t.Fatalf("seed %d, %d bytes: checksum while copying %08x (want %08x), copy equal: %v",
				seed, n, got, want, bytes.Equal(dst, src[:n]))
		}
	}
}
