package microbatch

// This file is a worker process's links to the other workers of its run
// (--workers process): the hash exchanges go straight from the producing
// worker to the consuming one over their mesh connection (wire.Mesh), not
// through the coordinator. Each batch's begin carries every worker's mesh
// address; for each other worker a watcher finds the connection (the
// lower id dials) and opens this worker's receiving end of every
// exchange on it, feeding the inbox, and the sending ends are opened as a
// stage first sends. A replacement listens at a new address, so a new
// address means a new link; the old one's watcher ends.

import (
	"context"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/rewind-engine/rewind/dataflow/wire"
)

// peerWait bounds how long a stage waits for the link to a worker that
// has not connected: one that died before it did never will, and the
// coordinator, which hears of the death on its own connection, rolls the
// batch back meanwhile.
const peerWait = 10 * time.Second

// peerWatch is the watcher of the link to one other worker.
type peerWatch struct {
	addr   string
	cancel context.CancelFunc
}

// txKey names the sending end of one stage's exchange to one worker's
// incarnation.
type txKey struct {
	peer int
	addr string
	si   int
}

// setPeers takes the mesh addresses of a batch's begin: a worker at a new
// address gets a new watcher, and the sending ends to its old address go.
func (pw *procWorker) setPeers(addrs []string) error {
	if len(addrs) != pw.cfg.Parallelism {
		return fmt.Errorf("a begin with %d worker addresses for %d workers", len(addrs), pw.cfg.Parallelism)
	}
	pw.peers = addrs
	for p, addr := range addrs {
		if p == pw.id || addr == "" {
			continue
		}
		if w := pw.watch[p]; w != nil {
			if w.addr == addr {
				continue
			}
			w.cancel()
		}
		for k, tx := range pw.tx {
			if k.peer == p && k.addr != addr {
				tx.Abandon()
				delete(pw.tx, k)
			}
		}
		ctx, cancel := context.WithCancel(pw.ctx)
		pw.watch[p] = &peerWatch{addr: addr, cancel: cancel}
		pw.wg.Add(1)
		go func() {
			defer pw.wg.Done()
			pw.watchPeer(ctx, p, addr)
		}()
	}
	return nil
}

// watchPeer opens this worker's receiving end of every exchange on the
// link to worker p at addr and feeds the inbox from them until ctx ends.
func (pw *procWorker) watchPeer(ctx context.Context, p int, addr string) {
	c, err := pw.mesh.Peer(ctx, p, addr)
	if err != nil {
		if ctx.Err() == nil {
			pw.inbox.brokeLink(p, addr, err)
		}
		return
	}
	pw.inbox.linked(p)
	for si, st := range pw.topo.stages {
		if !pw.topo.exchanges(si) {
			continue
		}
		rx, err := c.OpenReceiver(exchChannel(si), st.Schema, 64)
		if err != nil {
			pw.inbox.brokeLink(p, addr, err)
			return
		}
		pw.wg.Add(1)
		go func() {
			defer pw.wg.Done()
			defer rx.Close()
			pw.inbox.receive(ctx, rx, si, p, addr)
		}()
	}
}

// sender is the sending end of stage si's exchange to worker p, opened on
// first use.
func (pw *procWorker) sender(ctx context.Context, p, si int) (*wire.Sender, error) {
	if p >= len(pw.peers) || pw.peers[p] == "" {
		return nil, errPeerLink{peer: p, err: fmt.Errorf("no address for it")}
	}
	k := txKey{peer: p, addr: pw.peers[p], si: si}
	if tx := pw.tx[k]; tx != nil {
		return tx, nil
	}
	wctx, cancel := context.WithTimeout(ctx, peerWait)
	defer cancel()
	c, err := pw.mesh.Peer(wctx, p, k.addr)
	if err != nil {
		return nil, errPeerLink{peer: p, err: err}
	}
	tx, err := c.OpenSender(exchChannel(si), pw.topo.stages[si].Schema, pw.env.Alloc)
	if err != nil {
		return nil, errPeerLink{peer: p, err: err}
	}
	pw.tx[k] = tx
	return tx, nil
}

// sendExchange sends stage si's rows for every other worker straight to
// it, by key column, then the stage's end; a stage that failed sends only
// the end (the attempt is rolled back). A link that breaks drops its
// sending end, so the next send to that worker opens a fresh one.
func (pw *procWorker) sendExchange(ctx context.Context, si int, ok bool) error {
	bd := pw.bd
	for p := range pw.cfg.Parallelism {
		if p == pw.id {
			continue
		}
		tx, err := pw.sender(ctx, p, si)
		if err != nil {
			return err
		}
		err = pw.sendTo(ctx, tx, si, p, bd, ok)
		if err != nil {
			tx.Abandon()
			delete(pw.tx, txKey{peer: p, addr: pw.peers[p], si: si})
			return errPeerLink{peer: p, err: err}
		}
	}
	return nil
}

func (pw *procWorker) sendTo(ctx context.Context, tx *wire.Sender, si, p int, bd *batchData, ok bool) error {
	if ok {
		for _, col := range pw.topo.hashOut[si] {
			var bs []arrow.RecordBatch
			if parts := bd.hashed[si][col][pw.id]; parts != nil {
				bs = parts[p]
			}
			if err := sendGroup(ctx, tx, procHeader{Seq: pw.seq, Col: col}, bs); err != nil {
				return err
			}
		}
	}
	return sendHeader(ctx, tx, procHeader{Seq: pw.seq, End: true})
}
