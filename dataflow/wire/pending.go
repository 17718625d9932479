package wire

import "sync"

// Pending pairs the requests one side of a connection sends on its
// control channel with the answers its read loop receives: Add numbers a
// request and gives the channel its answer arrives on, the read loop
// hands each answer to Deliver, and Forget ends the wait (an answer that
// comes later is dropped). The zero value is ready to use.
type Pending[M any] struct {
	mu      sync.Mutex
	next    uint64
	waiting map[uint64]chan M
}

// Add numbers a new request (from 1) and returns the channel its answer
// will arrive on.
func (p *Pending[M]) Add() (uint64, <-chan M) {
	ch := make(chan M, 1)
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.waiting == nil {
		p.waiting = map[uint64]chan M{}
	}
	p.next++
	p.waiting[p.next] = ch
	return p.next, ch
}

// Forget stops waiting for request id's answer.
func (p *Pending[M]) Forget(id uint64) {
	p.mu.Lock()
	delete(p.waiting, id)
	p.mu.Unlock()
}

// Deliver hands m, the answer to request id, to its caller; an answer
// nobody waits for (its caller gave up, or a stranger's id) is dropped.
func (p *Pending[M]) Deliver(id uint64, m M) {
	p.mu.Lock()
	ch := p.waiting[id]
	delete(p.waiting, id)
	p.mu.Unlock()
	if ch != nil {
		ch <- m
	}
}
