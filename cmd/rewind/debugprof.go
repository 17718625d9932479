package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
)

// debugProfileEnv names an address (host:port) to serve Go's profiles on
// while a command runs, for finding what a long run's memory grows with:
// `go tool pprof -base early.pb.gz http://ADDR/debug/pprof/heap`, or what
// a latency tail waits on: `curl -o t.out 'http://ADDR/debug/pprof/trace?seconds=2'`
// and `go tool trace t.out`. It is a
// developer's aid, not a user-facing flag, so it is read from the
// environment and listed only in docs/memory.md.
const debugProfileEnv = "REWIND_DEBUG_PPROF"

// serveDebugProfiles starts the profile server when debugProfileEnv is
// set; a failure to listen is reported and the command goes on without it.
func serveDebugProfiles(stderr io.Writer) {
	addr := os.Getenv(debugProfileEnv)
	if addr == "" {
		return
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		fmt.Fprintf(stderr, "rewind: %s: %v (profiles not served)\n", debugProfileEnv, err)
		return
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	// An execution trace shows what a latency tail waits on (fsyncs,
	// the scheduler, GC), which a CPU profile cannot.
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	go func() { _ = http.Serve(ln, mux) }()
}
