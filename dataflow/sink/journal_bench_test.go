package sink

import (
	"context"
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/rewind-engine/rewind/dataflow/storage"
)

// BenchmarkCommittedFlush measures one epoch per operation as an executor
// drives it: Write, Flush and Commit of one batch, with and without the
// destination journal (a local store, fsyncing like the output). The
// difference is what checking the destination costs per flush.
func BenchmarkCommittedFlush(b *testing.B) {
	layout := testLayout()
	for _, mode := range []Mode{Append, Transactional, Idempotent} {
		for _, journaled := range []bool{false, true} {
			for _, n := range []int{1 << 12, 1 << 16} {
				b.Run(fmt.Sprintf("%s/journal=%v/rows=%d", mode, journaled, n), func(b *testing.B) {
					mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
					defer mem.AssertSize(b, 0)
					s := openSink(b, b.TempDir(), mode, Parquet, layout, mem)
					defer s.Close()
					if journaled {
						st, err := storage.Open(context.Background(), "file://"+b.TempDir(), storage.Options{})
						must(b, err, "storage")
						defer st.Close()
						must(b, s.(Attacher).Attach(NewJournal(context.Background(), st, "bench/job/run/")), "attach")
					}
					w, err := s.Writer(0, 0)
					must(b, err, "writer")
					defer w.Close()
					rows := benchRows(n)
					batch := batchOf(b, mem, layout, rows, nil)
					defer batch.Release()
					epoch := int64(0)
					for b.Loop() {
						// New versions each epoch, so the idempotent store
						// replaces rows rather than skipping them.
						if err := w.Write(epoch, batch); err != nil {
							b.Fatal(err)
						}
						if err := w.Flush(epoch); err != nil {
							b.Fatal(err)
						}
						if err := s.Commit(epoch); err != nil {
							b.Fatal(err)
						}
						epoch++
					}
					b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
				})
			}
		}
	}
}

// BenchmarkJournalSteps measures the two steps the journal adds to a
// transactional epoch on their own, as fsync latency on a shared disk
// drowns them in BenchmarkCommittedFlush: recording one entry (a Put in a
// local store) and reading a staged file back for its checksum.
func BenchmarkJournalSteps(b *testing.B) {
	b.Run("record-entry", func(b *testing.B) {
		st, err := storage.Open(context.Background(), "file://"+b.TempDir(), storage.Options{})
		must(b, err, "storage")
		defer st.Close()
		j := NewJournal(context.Background(), st, "bench/job/run/")
		e := stagedEntry{File: "e1-s0-a0-p0.parquet", Epoch: 1, Rows: 1, Size: 1}
		for b.Loop() {
			must(b, j.put(stagedEntryDir+e.File, encodeStagedEntry(e)), "put")
		}
	})
	for _, n := range []int{1 << 12, 1 << 16} {
		b.Run(fmt.Sprintf("verify-staged/rows=%d", n), func(b *testing.B) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(b, 0)
			dir := b.TempDir()
			s := openSink(b, dir, Transactional, Parquet, testLayout(), mem)
			defer s.Close()
			w, err := s.Writer(0, 0)
			must(b, err, "writer")
			batch := batchOf(b, mem, testLayout(), benchRows(n), nil)
			must(b, w.Write(0, batch), "write")
			batch.Release()
			must(b, w.Flush(0), "flush")
			must(b, w.Close(), "close")
			path := dir + "/" + StagingDir + "/e0-s0-a0-p0.parquet"
			var size int64
			for b.Loop() {
				size, _, err = fileCRC(path)
				must(b, err, "crc")
			}
			b.SetBytes(size)
		})
	}
}
