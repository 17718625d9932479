package wire

import (
	"encoding/json"
	"fmt"
)

// The executors' control messages are JSON documents of their own types;
// these are the one encoding and decoding they share.

// SendJSON sends v, JSON-encoded, as one control message on c.
func SendJSON(c interface{ SendControl([]byte) error }, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("encoding a control message: %w", err)
	}
	return c.SendControl(b)
}

// DecodeJSON decodes the control message b into a T; an error says b is
// not one, with its size (a peer's bytes are not echoed).
func DecodeJSON[T any](b []byte) (T, error) {
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return v, fmt.Errorf("a control message that is not one (%d bytes): %w", len(b), err)
	}
	return v, nil
}
