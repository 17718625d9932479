package storage

import (
	"context"
	"testing"
)

// Counting adds up what Get returned, not what Put wrote.
func TestCountingCountsGets(t *testing.T) {
	ctx := context.Background()
	base, err := Open(ctx, "file://"+t.TempDir(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer base.Close()
	c := NewCounting(base)
	if err := c.Put(ctx, "a", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	if c.Read() != 0 {
		t.Fatalf("a Put counted %d bytes read", c.Read())
	}
	for range 2 {
		if _, err := c.Get(ctx, "a"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Get(ctx, "missing"); err == nil {
		t.Fatal("missing object read")
	}
	if c.Read() != 10 {
		t.Fatalf("read %d bytes, want 10", c.Read())
	}
}
