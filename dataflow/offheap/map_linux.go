//go:build linux

package offheap

import "syscall"

const mappable = true

// mapAnon maps size bytes of zeroed memory, every page faulted in within
// the call (MAP_POPULATE).
func mapAnon(size int) ([]byte, error) {
	return syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE,
		syscall.MAP_PRIVATE|syscall.MAP_ANON|syscall.MAP_POPULATE)
}

func unmap(b []byte) error { return syscall.Munmap(b) }
