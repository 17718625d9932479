//go:build linux

package offheap

import "syscall"

const mappable = true

// mapAnon maps size bytes of zeroed memory; with populate, the kernel
// faults every page in within the call (MAP_POPULATE).
func mapAnon(size int, populate bool) ([]byte, error) {
	flags := syscall.MAP_PRIVATE | syscall.MAP_ANON
	if populate {
		flags |= syscall.MAP_POPULATE
	}
	return syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, flags)
}

func unmap(b []byte) error { return syscall.Munmap(b) }
