//go:build !linux

package offheap

// Elsewhere arrays stay on Go's heap.
const mappable = false

func mapAnon(int) ([]byte, error) { panic("offheap: no mappings on this system") }

func unmap([]byte) error { return nil }
