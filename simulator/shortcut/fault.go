package shortcut

import "sync/atomic"

// Faults make a shortcut wrong on purpose, so that tests can show the
// checks catch it (verify mode, the differential test, the shadow
// check). Nothing but tests sets one.
var faults atomic.Uint32

// InjectFault makes n wrong until undo is called. Only NodeKeys has a
// fault: node keys leave the nodes' labels out, so nodes that differ
// only by a label a pod selects on look alike.
func InjectFault(n Name) (undo func()) {
	b := n.bit()
	faults.Or(b)
	return func() { faults.And(^b) }
}

// Faulty reports whether n was made wrong (InjectFault).
func Faulty(n Name) bool { return faults.Load()&n.bit() != 0 }
