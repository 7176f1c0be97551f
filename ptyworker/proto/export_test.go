package proto

import "time"

// Internals for the tests of package proto_test, which need a worker's
// shared ring (package ptyworker, which package proto's own tests cannot
// import).

var (
	MapRing         = mapRing
	NewRightsReader = newRightsReader
	EventData       = eventData
)

const MinPooledData = minPooledData

func (v *ringView) Take(dst []byte, head uint64) (int, bool) { return v.take(dst, head) }
func (v *ringView) Unmap()                                   { v.unmap() }
func (v *ringView) Mem() []byte                              { return v.mem }
func (r *rightsReader) Close()                               { r.close() }

// SetSendInputTimeout sets SendInput's timeout and returns what puts the
// old one back.
func SetSendInputTimeout(d time.Duration) (restore func()) {
	old := sendInputTimeout
	sendInputTimeout = d
	return func() { sendInputTimeout = old }
}
