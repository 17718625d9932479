//go:build linux

package wire

import (
	"context"
	"errors"
	"fmt"
	"net"
	"syscall"
	"testing"
	"time"
)

// silentListener is a TCP socket that listens with a backlog of zero and
// never accepts: once its queue holds the connections it takes, the kernel
// drops every further SYN, so a connect to it hangs as one to an address
// whose packets vanish does. It returns the address.
func silentListener(t *testing.T) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
	// Fill the queue: connects that complete are queued; the first that
	// does not is the proof that the next dial will hang.
	for i := 0; ; i++ {
		if i == 8 {
			t.Fatalf("%s still completes connects after %d: cannot make a dial hang", addr, i)
		}
		c, err := net.DialTimeout("tcp", addr, 300*time.Millisecond)
		if err != nil {
			if !isTimeout(err) {
				t.Fatalf("filling %s: %v", addr, err)
			}
			return addr
		}
		t.Cleanup(func() { _ = c.Close() })
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestDialToASilentAddressEndsAtItsTimeout: a dial to an address that
// never answers a SYN ends at the dial's own timeout with an error naming
// the address, not at the system's connect timeout (about two minutes).
func TestDialToASilentAddressEndsAtItsTimeout(t *testing.T) {
	addr := silentListener(t)
	const timeout = 500 * time.Millisecond
	start := time.Now()
	_, _, err := dial(context.Background(), addr, Hello{Token: "t"}, Options{Log: t.Logf}, timeout)
	took := time.Since(start)
	if err == nil {
		t.Fatalf("dial to %s succeeded", addr)
	}
	if !isTimeout(err) || took > 10*timeout {
		t.Fatalf("dial to %s: %v after %v; want a timeout after about %v", addr, err, took, timeout)
	}
	t.Logf("%v after %v", err, took.Round(time.Millisecond))
}
