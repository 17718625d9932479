package run

import (
	"fmt"
	"net"
	"os"

	"github.com/rewind-engine/rewind/dataflow/wire"
)

// OpenMesh opens worker w's direct links to the other workers of its run
// (wire.Mesh): it listens on the interface c, its connection to the
// coordinator, goes out through, with the run's token. The worker then
// says ready with the mesh's address (SendReadyAt), and its coordinator
// passes every worker's address on (FleetSlot.Peer).
func OpenMesh(c *wire.Conn, w WorkerEnv) (*wire.Mesh, error) {
	token := os.Getenv(TokenEnv)
	if token == "" {
		return nil, fmt.Errorf("no run token for the links between workers: $%s is empty", TokenEnv)
	}
	host := ""
	if a, ok := c.LocalAddr().(*net.TCPAddr); ok {
		host = a.IP.String()
	}
	opts := wire.Options{Alloc: w.Alloc}
	if w.Log != nil {
		opts.Log = func(format string, args ...any) { w.Log.Info(fmt.Sprintf(format, args...)) }
	}
	return wire.NewMesh(w.ID, host, token, opts)
}

// Peers are the mesh addresses of the fleet's current incarnations, by
// worker id ("" for a worker without one): what a coordinator tells its
// workers at each attempt's start, so a replacement is reached at its
// new address.
func (f *Fleet) Peers() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, f.n)
	for id, s := range f.slots {
		if id >= 0 && id < f.n {
			out[id] = s.Peer
		}
	}
	return out
}
