package source

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"strconv"
	"sync"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// PushPartition is the name of the only partition of a push: source.
const PushPartition = "push"

var pushGenParamNames = []string{"records", "keys", "seed", "rate", "skew", "disorder"}

const (
	// pushChunkRows caps how many parsed records travel as one chunk from
	// the connection to a reader. A chunk is also the unit of hand-over.
	pushChunkRows = 4096
	// pushQueueLimit is how many parsed records the source holds before it
	// stops reading the connection, so a stalled job pushes back on the
	// pusher through TCP instead of growing memory without bound.
	pushQueueLimit = 64 << 10
)

// PushSource is the push: source, a forgetful feed: records arrive as lines
// "id,key,value,ts" over one loopback TCP connection and are handed over
// once. It exists to show what a job over a non-re-readable input can and
// cannot promise after a crash.
//
// # Accounting
//
// The source parses lines into chunks of records and queues them. A reader
// takes a whole chunk from the queue when it has nothing buffered; from that
// moment the chunk is handed over and gone from the source. Head counts the
// records handed over since the start of the feed. A reader returns rows of
// its chunk in batches of at most max, and the position after a batch is the
// feed index of the next row, i.e. records returned so far counting those
// handed to earlier readers.
//
// Opening the partition at a position behind the head (an engine restarting
// from an older recovery point) starts the new reader at the head: the feed
// range [position, head) is gone. It holds the records the engine had
// received after that position (its restored state no longer reflects them)
// and the records that sat unread in the buffer of the previous reader
// (handed over, then lost in the crash). Records still queued in the source
// or in flight on the connection are not lost; the next reader receives
// them.
//
// Lost reports the size of that range minus the part an earlier reopening
// already reported, so the same record is never counted twice. The two
// differ only when a restart goes back behind the head of an earlier restart,
// typically by using the same recovery point twice: the second time,
// [position, first head) was reported by the first reopening. Otherwise Lost
// is exactly head - position. Over a whole run, the records
// reflected in the final state plus the sum of Lost over all reopenings
// equals the records pushed.
//
// Only one reader exists at a time: opening a new one closes the previous
// one, whose buffered records are lost as described. A position ahead of the
// head is an error.
type PushSource struct {
	spec    string
	ln      net.Listener
	addr    string
	bounded bool
	gen     *genConfig // the generated form's records; nil for listen=
	opts    Options
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	mu      sync.Mutex
	changed chan struct{} // closed and replaced whenever the state below changes
	queue   []pushChunk
	queued  int
	head    int64 // records handed over to readers
	done    bool  // the feed ended; err says how (nil = clean end)
	err     error
	closed  bool
	cur     *pushReader
	conns   []net.Conn
	// lostSpans are the feed ranges [lo,hi) already reported lost, sorted
	// and disjoint; every hi <= head.
	lostSpans []span
}

// span is a half-open range of feed indexes.
type span struct{ lo, hi int64 }

// markLost records [lo,hi) as lost and returns how many of its records were
// not already recorded. Every recorded span ends at or before hi (spans end
// at the head of their time, and the head only grows), so the new span
// absorbs every span starting at or after lo and merges with one straddling
// lo.
func (s *PushSource) markLost(lo, hi int64) int64 {
	n := hi - lo
	keep := s.lostSpans[:0]
	for _, sp := range s.lostSpans {
		switch {
		case sp.hi < lo:
			keep = append(keep, sp)
		case sp.lo < lo: // straddles lo (or touches it): merge
			n -= sp.hi - lo
			lo = sp.lo
		default: // inside [lo,hi)
			n -= sp.hi - sp.lo
		}
	}
	s.lostSpans = append(keep, span{lo, hi})
	return n
}

// pushChunk is a run of parsed records, column by column.
type pushChunk struct {
	id, key, value, ts []int64
}

func (c *pushChunk) len() int { return len(c.id) }

func (c *pushChunk) add(row *[4]int64) {
	c.id = append(c.id, row[0])
	c.key = append(c.key, row[1])
	c.value = append(c.value, row[2])
	c.ts = append(c.ts, row[3])
}

func openPush(spec, body string, opts Options) (Source, error) {
	allowed := append([]string{"listen"}, pushGenParamNames...)
	ps, err := parseParams("push", body, allowed)
	if err != nil {
		return nil, err
	}
	s := &PushSource{spec: spec, opts: opts, changed: make(chan struct{})}
	listen, hasListen := "", false
	for _, p := range ps {
		if p.key == "listen" {
			listen, hasListen = p.val, true
		}
	}
	if hasListen {
		if len(ps) > 1 {
			return nil, errors.New("push: listen= cannot be combined with other parameters (use either push:listen=127.0.0.1:PORT, where an external pusher supplies the records, or push:records=N,keys=K,seed=S,rate=R,skew=Z,disorder=D)")
		}
		if s.ln, err = listenLoopback(listen); err != nil {
			return nil, err
		}
		s.bounded = true
	} else {
		if s.gen, err = parseGenConfig("push", body, pushGenParamNames, 1, opts); err != nil {
			return nil, err
		}
		if s.ln, err = listenLoopback("127.0.0.1:0"); err != nil {
			return nil, err
		}
		s.bounded = s.gen.records > 0
	}
	s.addr = s.ln.Addr().String()
	s.wg.Add(1)
	go s.accept()
	if s.gen != nil {
		ctx, cancel := context.WithCancel(context.Background())
		s.cancel = cancel
		s.wg.Add(1)
		go s.push(ctx)
	}
	return s, nil
}

// listenLoopback listens on addr, which must be a loopback address: the push
// feed is unauthenticated, so it must never be reachable from the network.
func listenLoopback(addr string) (net.Listener, error) {
	const want = "want 127.0.0.1:PORT, [::1]:PORT or localhost:PORT"
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("push: listen=%q is not host:port (%s)", addr, want)
	}
	if host == "localhost" {
		host = "127.0.0.1"
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("push: listen=%q: refusing a non-loopback address, the push feed binds only to loopback (%s)", addr, want)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		return nil, fmt.Errorf("push: listen=%q: %w", addr, err)
	}
	if a, ok := ln.Addr().(*net.TCPAddr); !ok || !a.IP.IsLoopback() {
		ln.Close()
		return nil, fmt.Errorf("push: listen=%q bound to non-loopback %s", addr, ln.Addr())
	}
	return ln, nil
}

// Addr returns the loopback address the source listens on; with port 0 in
// the spec it is where a pusher must connect.
func (s *PushSource) Addr() string { return s.addr }

// Head returns how many records have been handed over to readers since the
// start of the feed.
func (s *PushSource) Head() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.head
}

// Spec returns the text the source was opened from.
func (s *PushSource) Spec() string { return s.spec }

// Partitions returns the single partition "push".
func (s *PushSource) Partitions() []string { return []string{PushPartition} }

// Rereadable is false: a handed-over record is gone.
func (s *PushSource) Rereadable() bool { return false }

// Bounded is true for listen= (the feed ends when the pusher closes the
// connection) and for generated records=N; false for records=0.
func (s *PushSource) Bounded() bool { return s.bounded }

// broadcast wakes everyone waiting on a state change; s.mu must be held.
func (s *PushSource) broadcast() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// track registers a connection for Close; false if the source is already
// closed (the caller closes the connection).
func (s *PushSource) track(c net.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns = append(s.conns, c)
	return true
}

// finish records the end of the feed; the first reason wins.
func (s *PushSource) finish(err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.done {
		s.done, s.err = true, err
		s.broadcast()
	}
}

// enqueue queues a chunk, waiting while the queue is full. It reports false
// once the source is closed.
func (s *PushSource) enqueue(c pushChunk) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.queued >= pushQueueLimit && !s.closed {
		ch := s.changed
		s.mu.Unlock()
		<-ch
		s.mu.Lock()
	}
	if s.closed {
		return false
	}
	if c.len() > 0 {
		s.queue = append(s.queue, c)
		s.queued += c.len()
		s.broadcast()
	}
	return true
}

// accept serves the one pusher of the feed: the first connection. The
// listener is closed after it, so a second pusher is refused instead of
// interleaving its records with the first.
func (s *PushSource) accept() {
	defer s.wg.Done()
	conn, err := s.ln.Accept()
	s.ln.Close()
	if err != nil {
		s.finish(fmt.Errorf("push: no pusher connected: %w", err))
		return
	}
	if !s.track(conn) {
		conn.Close()
		return
	}
	defer conn.Close()
	s.feed(conn)
}

// feed parses lines from the pusher into chunks. A chunk is queued when it
// is full or when no more input is buffered, so records are not held back
// waiting for a chunk to fill. An empty line is skipped, and a first line
// equal to the CSV header is accepted and skipped.
func (s *PushSource) feed(conn net.Conn) {
	br := bufio.NewReaderSize(conn, maxLine)
	var c pushChunk
	var row [4]int64
	line := 0
	for {
		b, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			s.enqueue(c)
			s.finish(fmt.Errorf("push: pushed line %d is longer than %d bytes", line+1, maxLine))
			return
		}
		if len(b) > 0 {
			line++
			t := trimEOL(b)
			if len(t) > 0 && !(line == 1 && string(t) == csvHeader) {
				if msg := parseRow(t, &row); msg != "" {
					s.enqueue(c)
					s.finish(fmt.Errorf("push: pushed line %d is malformed: %s (want %s)", line, msg, csvHeader))
					return
				}
				c.add(&row)
			}
		}
		if err != nil {
			s.enqueue(c)
			if err == io.EOF {
				s.finish(nil)
			} else {
				s.finish(fmt.Errorf("push: reading the pushed feed: %w", err))
			}
			return
		}
		if c.len() >= pushChunkRows || (c.len() > 0 && br.Buffered() == 0) {
			if !s.enqueue(c) {
				return
			}
			c = pushChunk{}
		}
	}
}

// push is the generated form's pusher: it connects to the source's own
// listener and writes the generated records once, paced to rate if set,
// then closes the connection, which ends the feed.
func (s *PushSource) push(ctx context.Context) {
	defer s.wg.Done()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", s.addr)
	if err != nil {
		s.finish(fmt.Errorf("push: the generated pusher cannot connect: %w", err))
		return
	}
	if !s.track(conn) {
		conn.Close()
		return
	}
	defer conn.Close()
	cfg := s.gen
	var pace *pacer
	if cfg.rate > 0 {
		pace = &pacer{rate: uint64(cfg.rate), parts: 1, now: s.opts.Now, sleep: s.opts.Sleep, start: anchor(s.opts.Now)}
	}
	end := int64(math.MaxInt64)
	if cfg.records > 0 {
		end = cfg.records
	}
	const batch = 4096
	var cols [4][batch]int64
	bw := bufio.NewWriterSize(conn, 64<<10)
	var buf []byte
	for seq := int64(0); seq < end; {
		n := min(batch, end-seq)
		if pace != nil {
			if n, err = pace.take(ctx, seq, n); err != nil {
				return
			}
		} else if ctx.Err() != nil {
			return
		}
		cfg.fill(0, seq, cols[0][:n], cols[1][:n], cols[2][:n], cols[3][:n])
		for i := range n {
			buf = buf[:0]
			for c := range cols {
				if c > 0 {
					buf = append(buf, ',')
				}
				buf = strconv.AppendInt(buf, cols[c][i], 10)
			}
			buf = append(buf, '\n')
			if _, err := bw.Write(buf); err != nil {
				return
			}
		}
		if pace != nil {
			// Paced records are due now: do not let them sit in the buffer.
			if err := bw.Flush(); err != nil {
				return
			}
		}
		seq += n
	}
	// The deferred Close ends the feed with EOF at the source.
	bw.Flush()
}

// Close stops the feed: the listener, the connections and the generated
// pusher. A reader blocked in Next returns an error.
func (s *PushSource) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	conns := s.conns
	s.conns = nil
	s.queue, s.queued = nil, 0
	s.broadcast()
	s.mu.Unlock()
	if s.cancel != nil {
		s.cancel()
	}
	if s.ln != nil {
		s.ln.Close()
	}
	for _, c := range conns {
		c.Close()
	}
	s.wg.Wait()
	return nil
}

// Open opens the push partition at pos, replacing any previous reader. A
// position behind the head is not an error: the reader starts at the head
// and Lost says how many records are gone (see PushSource).
func (s *PushSource) Open(ctx context.Context, i int, pos Position, alloc memory.Allocator) (Reader, error) {
	if _, err := checkOpenPos("push", []string{PushPartition}, i, pos); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, errors.New("push: source closed")
	}
	if pos.Offset > s.head {
		return nil, fmt.Errorf("push: position %d is ahead of the %d records handed over so far", pos.Offset, s.head)
	}
	if s.cur != nil {
		s.cur.closed = true
		s.cur.replaced = true
	}
	var lost int64
	if pos.Offset < s.head {
		lost = s.markLost(pos.Offset, s.head)
	}
	r := &pushReader{src: s, next: s.head, lost: lost, alloc: alloc}
	s.cur = r
	s.broadcast() // wake the replaced reader if it waits in Next
	return r, nil
}

// pushReader is the current reader of a PushSource.
type pushReader struct {
	src   *PushSource
	alloc memory.Allocator
	next  int64 // feed index of the next row = position
	lost  int64
	buf   pushChunk // handed over, not yet returned
	off   int

	// guarded by src.mu
	closed   bool
	replaced bool
}

// Next returns up to max rows, first from the reader's buffered chunk, else
// from the next queued chunk, waiting for the pusher if none is queued.
func (r *pushReader) Next(ctx context.Context, max int) (arrow.RecordBatch, Position, error) {
	s := r.src
	pos := Position{Partition: PushPartition, Offset: r.next}
	if err := checkMax("push", max); err != nil {
		return nil, pos, err
	}
	s.mu.Lock()
	for r.off >= r.buf.len() {
		switch {
		case r.replaced:
			s.mu.Unlock()
			return nil, pos, errors.New("push: reader was replaced by a newer Open of the partition")
		case r.closed:
			s.mu.Unlock()
			return nil, pos, errors.New("push: Next on a closed reader")
		case s.closed:
			s.mu.Unlock()
			return nil, pos, errors.New("push: source closed")
		case len(s.queue) > 0:
			c := s.queue[0]
			s.queue[0] = pushChunk{}
			s.queue = s.queue[1:]
			s.queued -= c.len()
			s.head += int64(c.len())
			r.buf, r.off = c, 0
			s.broadcast() // room in the queue for the feed
		case s.done:
			err := s.err
			s.mu.Unlock()
			if err == nil {
				err = io.EOF
			}
			return nil, pos, err
		default:
			ch := s.changed
			s.mu.Unlock()
			select {
			case <-ch:
			case <-ctx.Done():
				return nil, pos, ctx.Err()
			}
			s.mu.Lock()
		}
	}
	if r.closed {
		s.mu.Unlock()
		return nil, pos, errors.New("push: Next on a closed reader")
	}
	s.mu.Unlock()
	n := min(max, r.buf.len()-r.off)
	c := newCols(r.alloc, n)
	copy(c.id, r.buf.id[r.off:])
	copy(c.key, r.buf.key[r.off:])
	copy(c.value, r.buf.value[r.off:])
	copy(c.ts, r.buf.ts[r.off:])
	r.off += n
	r.next += int64(n)
	return c.finish(), Position{Partition: PushPartition, Offset: r.next}, nil
}

// Lost returns how many records were gone when this reader was opened:
// head − position, less any of those an earlier reopening already reported
// (see PushSource).
func (r *pushReader) Lost() int64 { return r.lost }

// Close closes the reader. Records it had taken but not returned stay
// counted in the head, so the next Open reports them as lost.
func (r *pushReader) Close() error {
	s := r.src
	s.mu.Lock()
	defer s.mu.Unlock()
	r.closed = true
	if s.cur == r {
		s.cur = nil
	}
	s.broadcast()
	return nil
}
