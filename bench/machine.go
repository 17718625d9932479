package bench

import (
	"os"
	"runtime"
	"strings"
)

// machineOf describes this machine and the kind of storage at url.
func machineOf(url string) Machine {
	kind := "file"
	if strings.HasPrefix(url, "s3://") {
		kind = "s3"
	}
	return Machine{CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), GoVersion: runtime.Version(),
		OS: runtime.GOOS, Arch: runtime.GOARCH, Storage: kind, CPUModel: cpuModel(), LoadAverage: loadAverage()}
}

// cpuModel is the first "model name" of /proc/cpuinfo, or "".
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// loadAverage is the 1-minute load average of /proc/loadavg, or "": on a
// shared machine it says how many of the cores were really free.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	if f := strings.Fields(string(b)); len(f) > 0 {
		return f[0]
	}
	return ""
}
