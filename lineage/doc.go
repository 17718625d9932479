// Package lineage records the derivation of every stateless piece (which
// input range, which steps, which parent pieces) and rebuilds just the lost
// pieces by re-running their derivations, spread over the surviving workers.
// Not implemented yet: issue #6.
package lineage
