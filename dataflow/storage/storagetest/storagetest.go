// Package storagetest is the conformance suite every storage.Store must
// pass. Each backend's tests call Run with a function that opens a fresh,
// empty store; the suite then checks the whole contract: round trips,
// overwrite, listing, deletion, checksum verification of torn and corrupt
// objects, concurrency and atomic replacement.
package storagetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rewind-engine/rewind/dataflow/storage"
)

// Run runs the conformance suite. open must return a new, empty store for
// the calling (sub)test and arrange its Close (and any cleanup) with
// t.Cleanup. The store must implement storage.RawAccess so the suite can
// tamper with stored bytes.
func Run(t *testing.T, open func(t *testing.T) storage.Store) {
	tests := []struct {
		name string
		fn   func(t *testing.T, s storage.Store)
	}{
		{"RoundTrip", testRoundTrip},
		{"Overwrite", testOverwrite},
		{"ListPrefixAndOrder", testList},
		{"Delete", testDelete},
		{"GetMissing", testGetMissing},
		{"FlippedByteIsCorrupt", testFlippedByte},
		{"TruncatedIsCorrupt", testTruncated},
		{"MissingTrailerIsCorrupt", testMissingTrailer},
		{"AppendedBytesAreCorrupt", testAppended},
		{"ConcurrentPuts", testConcurrentPuts},
		{"Subdirectories", testSubdirectories},
		{"InvalidNames", testInvalidNames},
		{"AtomicReplaceUnderReaders", testAtomicReplace},
		{"UseAfterClose", testUseAfterClose},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := open(t)
			if s.URL() == "" {
				t.Fatal("URL() is empty")
			}
			tc.fn(t, s)
		})
	}
}

// Payload returns n deterministic pseudo-random bytes for seed.
func Payload(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	b := make([]byte, n)
	for i := 0; i < n; i += 8 {
		v := r.Uint64()
		for j := 0; j < 8 && i+j < n; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func mustPut(t *testing.T, s storage.Store, name string, data []byte) {
	t.Helper()
	if err := s.Put(ctxT(t), name, data); err != nil {
		t.Fatalf("Put(%q, %d bytes): %v", name, len(data), err)
	}
}

func mustGet(t *testing.T, s storage.Store, name string) []byte {
	t.Helper()
	got, err := s.Get(ctxT(t), name)
	if err != nil {
		t.Fatalf("Get(%q): %v", name, err)
	}
	return got
}

func mustList(t *testing.T, s storage.Store, prefix string) []storage.Object {
	t.Helper()
	objs, err := s.List(ctxT(t), prefix)
	if err != nil {
		t.Fatalf("List(%q): %v", prefix, err)
	}
	return objs
}

func names(objs []storage.Object) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = o.Name
	}
	return out
}

func sameNames(t *testing.T, what string, got []storage.Object, want ...string) {
	t.Helper()
	if g := names(got); strings.Join(g, "|") != strings.Join(want, "|") {
		t.Fatalf("%s = %q, want %q", what, g, want)
	}
}

func raw(t *testing.T, s storage.Store) storage.RawAccess {
	t.Helper()
	r, ok := s.(storage.RawAccess)
	if !ok {
		t.Fatalf("%T does not implement storage.RawAccess; the suite needs it to tamper with objects", s)
	}
	return r
}

func testRoundTrip(t *testing.T, s storage.Store) {
	sizes := []int{0, 1, 15, 16, 17, 1000, 4<<20 + 3}
	for i, n := range sizes {
		name := fmt.Sprintf("rt/obj-%d", n)
		data := Payload(uint64(i+1), n)
		orig := bytes.Clone(data)
		mustPut(t, s, name, data)
		// Put must not keep the caller's buffer.
		for j := range data {
			data[j] ^= 0xff
		}
		if got := mustGet(t, s, name); !bytes.Equal(got, orig) {
			t.Fatalf("Get(%q) returned %d bytes differing from the %d put", name, len(got), len(orig))
		}
	}
	objs := mustList(t, s, "rt/")
	if len(objs) != len(sizes) {
		t.Fatalf("List(rt/) has %d objects, want %d: %q", len(objs), len(sizes), names(objs))
	}
	want := map[string]int64{}
	for _, n := range sizes {
		want[fmt.Sprintf("rt/obj-%d", n)] = int64(n)
	}
	for _, o := range objs {
		if w, ok := want[o.Name]; !ok || o.Size != w {
			t.Errorf("List entry %q has Size %d, want %d (payload bytes, trailer excluded)", o.Name, o.Size, w)
		}
		if o.ModTime.IsZero() || time.Since(o.ModTime) > 24*time.Hour {
			t.Errorf("List entry %q has implausible ModTime %v", o.Name, o.ModTime)
		}
	}
}

func testOverwrite(t *testing.T, s storage.Store) {
	a, b := Payload(1, 5000), Payload(2, 300)
	mustPut(t, s, "ow", a)
	mustPut(t, s, "ow", b)
	if got := mustGet(t, s, "ow"); !bytes.Equal(got, b) {
		t.Fatalf("after overwrite Get returned %d bytes, want the second payload (%d bytes)", len(got), len(b))
	}
	objs := mustList(t, s, "")
	sameNames(t, "List after overwrite", objs, "ow")
	if objs[0].Size != int64(len(b)) {
		t.Fatalf("List Size after overwrite = %d, want %d", objs[0].Size, len(b))
	}
}

func testList(t *testing.T, s storage.Store) {
	all := []string{"a-b", "a/1", "a/10", "a/2", "a/b/c", "ab", "b", "chk/7/op-1/kg-0", "chk/7/op-1/kg-1", "chk/70/op-1/kg-0"}
	order := rand.Perm(len(all))
	for _, i := range order {
		mustPut(t, s, all[i], []byte(all[i]))
	}
	sameNames(t, `List("")`, mustList(t, s, ""), all...)
	sameNames(t, `List("a/")`, mustList(t, s, "a/"), "a/1", "a/10", "a/2", "a/b/c")
	sameNames(t, `List("a")`, mustList(t, s, "a"), "a-b", "a/1", "a/10", "a/2", "a/b/c", "ab")
	sameNames(t, `List("a/1")`, mustList(t, s, "a/1"), "a/1", "a/10")
	sameNames(t, `List("chk/7/")`, mustList(t, s, "chk/7/"), "chk/7/op-1/kg-0", "chk/7/op-1/kg-1")
	sameNames(t, `List("chk/7")`, mustList(t, s, "chk/7"), "chk/7/op-1/kg-0", "chk/7/op-1/kg-1", "chk/70/op-1/kg-0")
	sameNames(t, `List("chk/7/op-1/kg-1")`, mustList(t, s, "chk/7/op-1/kg-1"), "chk/7/op-1/kg-1")
	sameNames(t, `List("zzz")`, mustList(t, s, "zzz"))
	sameNames(t, `List("nothere/")`, mustList(t, s, "nothere/"))
	sameNames(t, `List("../")`, mustList(t, s, "../"))
}

func testDelete(t *testing.T, s storage.Store) {
	ctx := ctxT(t)
	mustPut(t, s, "d/x", []byte("x"))
	mustPut(t, s, "d/y", []byte("y"))
	if err := s.Delete(ctx, "d/x"); err != nil {
		t.Fatalf("Delete(d/x): %v", err)
	}
	if _, err := s.Get(ctx, "d/x"); !errors.Is(err, storage.ErrNotFound) {
		t.Fatalf("Get after Delete: err = %v, want ErrNotFound", err)
	}
	sameNames(t, "List after Delete", mustList(t, s, ""), "d/y")
	if got := mustGet(t, s, "d/y"); string(got) != "y" {
		t.Fatalf("sibling d/y = %q after deleting d/x", got)
	}
	for _, name := range []string{"d/x", "never/was", "d/y/below-an-object"} {
		if err := s.Delete(ctx, name); err != nil {
			t.Fatalf("Delete of missing %q: %v, want nil", name, err)
		}
	}
	if err := s.Delete(ctx, "d/y"); err != nil {
		t.Fatalf("Delete(d/y): %v", err)
	}
	sameNames(t, "List after deleting everything", mustList(t, s, ""))
	// The emptied "directory" must not block reuse of the names.
	mustPut(t, s, "d/x", []byte("again"))
	if got := mustGet(t, s, "d/x"); string(got) != "again" {
		t.Fatalf("Get after re-Put = %q", got)
	}
}

func testGetMissing(t *testing.T, s storage.Store) {
	ctx := ctxT(t)
	mustPut(t, s, "present/obj", []byte("p"))
	for _, name := range []string{"missing", "present/missing", "present", "present/obj/below"} {
		_, err := s.Get(ctx, name)
		if !errors.Is(err, storage.ErrNotFound) {
			t.Fatalf("Get(%q): err = %v, want ErrNotFound", name, err)
		}
		if !strings.Contains(err.Error(), name) {
			t.Errorf("Get(%q) error %q does not name the object", name, err)
		}
	}
}

// expectCorrupt stores stored as the raw bytes of name and checks Get
// reports ErrCorrupt naming the object.
func expectCorrupt(t *testing.T, s storage.Store, name string, stored []byte, what string) {
	t.Helper()
	ctx := ctxT(t)
	if err := raw(t, s).RawPut(ctx, name, stored); err != nil {
		t.Fatalf("RawPut(%q): %v", name, err)
	}
	got, err := s.Get(ctx, name)
	if !errors.Is(err, storage.ErrCorrupt) {
		t.Fatalf("%s: Get(%q) = %d bytes, err %v; want ErrCorrupt", what, name, len(got), err)
	}
	if got != nil {
		t.Errorf("%s: Get returned %d bytes along with the error", what, len(got))
	}
	if !strings.Contains(err.Error(), name) {
		t.Errorf("%s: error %q does not name the object", what, err)
	}
}

func storedBytes(t *testing.T, s storage.Store, name string, payload []byte) []byte {
	t.Helper()
	mustPut(t, s, name, payload)
	b, err := raw(t, s).RawGet(ctxT(t), name)
	if err != nil {
		t.Fatalf("RawGet(%q): %v", name, err)
	}
	if len(b) <= len(payload) || !bytes.Equal(b[:len(payload)], payload) {
		t.Fatalf("RawGet(%q): %d stored bytes do not start with the %d-byte payload", name, len(b), len(payload))
	}
	return b
}

func testFlippedByte(t *testing.T, s storage.Store) {
	payload := Payload(7, 64<<10)
	good := storedBytes(t, s, "c/flip", payload)
	positions := map[string]int{
		"first payload byte":   0,
		"middle payload byte":  len(payload) / 2,
		"last payload byte":    len(payload) - 1,
		"first trailer byte":   len(payload),
		"last stored byte":     len(good) - 1,
		"second-to-last bytes": len(good) - 5,
	}
	for what, pos := range positions {
		bad := bytes.Clone(good)
		bad[pos] ^= 0x01
		expectCorrupt(t, s, "c/flip", bad, what)
	}
	// A correct object under the same name reads fine again.
	if err := raw(t, s).RawPut(ctxT(t), "c/flip", good); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, s, "c/flip"); !bytes.Equal(got, payload) {
		t.Fatal("restored object does not read back")
	}
}

func testTruncated(t *testing.T, s storage.Store) {
	payload := Payload(8, 100<<10)
	good := storedBytes(t, s, "c/trunc", payload)
	for _, n := range []int{len(good) - 1, len(good) - 8, len(payload), len(payload) / 2, 15, 1, 0} {
		expectCorrupt(t, s, "c/trunc", good[:n], fmt.Sprintf("truncated to %d of %d bytes", n, len(good)))
	}
	// The trailer of an empty payload alone is valid; cutting it is not.
	empty := storedBytes(t, s, "c/empty", nil)
	expectCorrupt(t, s, "c/empty", empty[:len(empty)-1], "empty payload with torn trailer")
}

func testMissingTrailer(t *testing.T, s storage.Store) {
	expectCorrupt(t, s, "c/plain", []byte("a plain file written without Put, long enough to hold a trailer"), "no trailer")
	expectCorrupt(t, s, "c/short", []byte("tiny"), "shorter than a trailer")
}

func testAppended(t *testing.T, s storage.Store) {
	good := storedBytes(t, s, "c/app", Payload(9, 1000))
	expectCorrupt(t, s, "c/app", append(bytes.Clone(good), 'x'), "one byte appended")
	// Two valid objects glued together: the trailer matches the second's
	// length only if it were alone.
	expectCorrupt(t, s, "c/app", append(bytes.Clone(good), good...), "object stored twice")
}

func testConcurrentPuts(t *testing.T, s storage.Store) {
	const writers, each = 8, 4
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				name := fmt.Sprintf("conc/w%d/o%d", w, i)
				if err := s.Put(context.Background(), name, Payload(uint64(w*100+i), 10_000+w*1000+i)); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if t.Failed() {
		return
	}
	objs := mustList(t, s, "conc/")
	if len(objs) != writers*each {
		t.Fatalf("List after concurrent puts has %d objects, want %d", len(objs), writers*each)
	}
	for w := range writers {
		for i := range each {
			name := fmt.Sprintf("conc/w%d/o%d", w, i)
			if got := mustGet(t, s, name); !bytes.Equal(got, Payload(uint64(w*100+i), 10_000+w*1000+i)) {
				t.Fatalf("Get(%q) differs from what its writer put", name)
			}
		}
	}
}

func testSubdirectories(t *testing.T, s storage.Store) {
	deep := "a/b/c/d/e/f.bin"
	mustPut(t, s, deep, []byte("deep"))
	mustPut(t, s, "a/b/x", []byte("x"))
	mustPut(t, s, "a/top", []byte("top"))
	if got := mustGet(t, s, deep); string(got) != "deep" {
		t.Fatalf("Get(%q) = %q", deep, got)
	}
	sameNames(t, `List("a/b/")`, mustList(t, s, "a/b/"), deep, "a/b/x")
	if err := s.Delete(ctxT(t), deep); err != nil {
		t.Fatalf("Delete(%q): %v", deep, err)
	}
	sameNames(t, `List("a/") after deleting the deep object`, mustList(t, s, "a/"), "a/b/x", "a/top")
	// An object name that is a parent "directory" of another cannot hold
	// data on every backend; Put must fail cleanly rather than corrupt.
	if err := s.Put(ctxT(t), "a/top/child", []byte("c")); err == nil {
		if got := mustGet(t, s, "a/top/child"); string(got) != "c" {
			t.Fatalf("Put(a/top/child) succeeded but reads back %q", got)
		}
	}
	if got := mustGet(t, s, "a/top"); string(got) != "top" {
		t.Fatalf("a/top = %q after a Put below it", got)
	}
}

func testInvalidNames(t *testing.T, s storage.Store) {
	ctx := ctxT(t)
	bad := []string{"", "/abs", "../escape", "a/../../escape", "a/..", "./a", "a/./b", "a//b", "a/", ".tmp-x", "a/.tmp-1-2", `a\b`}
	for _, name := range bad {
		if err := s.Put(ctx, name, []byte("x")); err == nil {
			t.Errorf("Put(%q) succeeded, want an error", name)
		}
		if _, err := s.Get(ctx, name); err == nil || errors.Is(err, storage.ErrNotFound) {
			t.Errorf("Get(%q): err = %v, want an invalid-name error", name, err)
		}
		if err := s.Delete(ctx, name); err == nil {
			t.Errorf("Delete(%q) succeeded, want an error", name)
		}
	}
	sameNames(t, "List after rejected puts", mustList(t, s, ""))
}

// testAtomicReplace overwrites one object over and over while readers
// fetch it: every read must be exactly one of the versions put, never a
// mix, a prefix or a checksum failure.
func testAtomicReplace(t *testing.T, s storage.Store) {
	versions := [][]byte{Payload(11, 300<<10), Payload(12, 200<<10), Payload(13, 1)}
	mustPut(t, s, "atomic", versions[0])
	var (
		wg    sync.WaitGroup
		stop  = make(chan struct{})
		mu    sync.Mutex
		reads int
	)
	for range 2 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				got, err := s.Get(context.Background(), "atomic")
				if err != nil {
					t.Errorf("Get during overwrites: %v", err)
					return
				}
				if !bytes.Equal(got, versions[0]) && !bytes.Equal(got, versions[1]) && !bytes.Equal(got, versions[2]) {
					t.Errorf("Get during overwrites returned %d bytes matching no version", len(got))
					return
				}
				mu.Lock()
				reads++
				mu.Unlock()
			}
		})
	}
	for i := range 30 {
		if err := s.Put(context.Background(), "atomic", versions[i%3]); err != nil {
			t.Errorf("Put #%d: %v", i, err)
			break
		}
	}
	close(stop)
	wg.Wait()
	if reads == 0 {
		t.Fatal("readers completed no Get while the writer ran")
	}
}

func testUseAfterClose(t *testing.T, s storage.Store) {
	ctx := ctxT(t)
	mustPut(t, s, "closing", []byte("x"))
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := s.Put(ctx, "closing", []byte("y")); err == nil {
		t.Error("Put after Close succeeded")
	}
	if _, err := s.Get(ctx, "closing"); err == nil {
		t.Error("Get after Close succeeded")
	}
	if _, err := s.List(ctx, ""); err == nil {
		t.Error("List after Close succeeded")
	}
	if err := s.Delete(ctx, "closing"); err == nil {
		t.Error("Delete after Close succeeded")
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}
