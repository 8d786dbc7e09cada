// Package deadline arms a connection's write deadline lazily: a write
// must still be cut off when the peer stops reading, but setting the
// deadline before every write costs a runtime timer update per frame,
// which on a busy node is a few percent of its CPU.
//
// It owns only that bookkeeping. It must never read or write the
// connection itself, and never hold a lock: its caller serializes the
// writes (and with them the calls to Arm).
package deadline
