//go:build !unix

package sink

import (
	"errors"
	"time"
)

var errStoreLocked = errors.New("locked")

// lockStore does not lock on this platform.
func lockStore(string, time.Duration) (func(), error) { return func() {}, nil }
