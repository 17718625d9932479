package storage

import (
	"context"
	"sync/atomic"
)

// Counting is a Store that counts the payload bytes its Gets returned, so
// that an executor can bill what a restore read (restore_bytes) without
// counting at every read site: it takes Read before and after.
type Counting struct {
	Store
	read atomic.Int64
}

// NewCounting wraps s.
func NewCounting(s Store) *Counting { return &Counting{Store: s} }

// Get implements Store.
func (c *Counting) Get(ctx context.Context, name string) ([]byte, error) {
	data, err := c.Store.Get(ctx, name)
	c.read.Add(int64(len(data)))
	return data, err
}

// Read is the bytes Get has returned so far.
func (c *Counting) Read() int64 { return c.read.Load() }
