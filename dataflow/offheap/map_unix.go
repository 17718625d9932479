//go:build unix

package offheap

import "syscall"

const mappable = true

func mapAnon(size int) ([]byte, error) {
	return syscall.Mmap(-1, 0, size, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_PRIVATE|syscall.MAP_ANON)
}

func unmap(b []byte) error { return syscall.Munmap(b) }
