// Package wire is how rewind's processes talk: a coordinator and the
// worker processes it starts (or that join it), over TCP. It carries two
// things on one connection: control messages (plan, acks, commits,
// heartbeats), opaque here, and data channels, each one stream of Arrow
// record batches with barriers in their place between them.
//
// Nothing here knows about executors or jobs. The package owns framing,
// the handshake, flow control and failure detection; the executors own
// what the messages mean.
//
// # Frames
//
// Everything on the wire is a frame: a 12-byte header (magic, kind,
// version, channel, length), the payload, and a CRC32C of the payload.
// A reader refuses a frame longer than its bound before allocating it,
// and any frame that is not one (bad magic, unknown kind, wrong version,
// a checksum that does not match, a stream cut inside a frame) closes
// that connection with the reason logged; it never panics the process.
// Batches travel as Arrow IPC messages, decoded without a copy into the
// receiver's allocator, and checked against their own buffers (the
// transport carries fixed-width columns, which is what every rewind schema
// holds).
//
// # Joining
//
// The coordinator makes a token per run (NewToken) and listens, on
// loopback unless told otherwise. A worker dials and says Hello with the
// token; a wrong token, another protocol version, or anything but a Hello
// is refused and logged, and the stranger never reaches Accept. The
// Welcome carries the worker's whole configuration, so a worker needs to
// know only the address and the token.
//
// Two frames end a connection on purpose. A close frame (Conn.Close)
// tells the peer the end is deliberate; without it a close is a death,
// since the kernel closes a dead process's sockets just the same. A kill
// frame (Conn.Kill) asks the peer to end its own process, for a worker
// on a machine its coordinator cannot signal; only a side with
// Options.OnKill takes it, so a worker can never end its coordinator.
//
// # The caller's duties
//
// A receiver grants its sender as many batches as it has room for, and
// one more each time Next hands one over; a sender without credit waits.
// So the caller must keep calling Next on every channel it opened, or its
// sender stalls (that is the backpressure a record-at-a-time pipeline needs). Control
// messages must be read too: the connection's reader waits for room in
// the control queue. A batch from Next is the caller's: release it.
//
// A connection closes on its first error, on either side. With a
// heartbeat timeout set, a peer that sends nothing at all for that long
// (a frozen or partitioned process) is declared dead the same way;
// Done is closed, and Err says why. Everything blocked on the connection
// returns that error.
//
// A coordinator's loop, in outline:
//
//	token, _ := wire.NewToken()
//	l, _ := wire.Listen("", wire.ListenConfig{Token: token,
//		Welcome: func(h wire.Hello) (wire.Welcome, error) { return configFor(h.Worker) },
//		Conn:    wire.Options{HeartbeatInterval: 100 * time.Millisecond, HeartbeatTimeout: time.Second}})
//	startWorkers(l.Addr(), token)
//	c, hello, _ := l.Accept(ctx)
//	rx, _ := c.OpenReceiver(channel, schema, 8)
//	for {
//		it, err := rx.Next(ctx)
//		if err != nil { // the worker is gone: c.Err() says why
//			return recover(hello.Worker, err)
//		}
//		switch {
//		case it.End:
//			return nil
//		case it.Batch != nil:
//			process(it.Batch)
//			it.Batch.Release()
//		default:
//			barrier(it.Barrier)
//		}
//	}
//
// and a worker's:
//
//	c, welcome, err := wire.Dial(ctx, addr, wire.Hello{Token: token, Worker: id}, opts)
//	tx, _ := c.OpenSender(channel, schema, alloc)
//	for batch := range produce(welcome.Config) {
//		if err := tx.Send(ctx, batch); err != nil { ... }
//		batch.Release()
//	}
//	tx.End(ctx)
package wire
