package storage

import (
	"crypto/tls"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// sendQueue returns how many bytes written to c the kernel still holds,
// unsent or not yet acknowledged by the peer (SIOCOUTQ on a TCP socket),
// and false when c is not a socket it can ask.
func sendQueue(c net.Conn) (int64, bool) {
	if t, ok := c.(*tls.Conn); ok {
		c = t.NetConn()
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return 0, false
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return 0, false
	}
	n, qerr := 0, error(nil)
	if err := rc.Control(func(fd uintptr) { n, qerr = unix.IoctlGetInt(int(fd), unix.SIOCOUTQ) }); err != nil || qerr != nil {
		return 0, false
	}
	return int64(n), true
}
