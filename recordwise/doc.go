// Package recordwise runs long-lived workers through which each record flows
// as it arrives. A marker (barrier) injected at the sources travels with the
// records; each operator saves its part when the marker reaches it, aligned
// or unaligned, and the coordinator writes the recovery point's metadata only
// once every part is durable.
package recordwise
