// Package fsm is the deterministic state machine of one queue partition.
//
// It owns the partition's logical state: the messages with their delivery
// state (ready, delayed, leased, dead-lettered), the per-group order, the
// deduplication window, the queue configuration and the counters. Message
// headers and bodies (a message's stored payload) live in a BodyStore; RAM
// holds an index, metadata and each payload's Loc only. A send entry carries
// every payload as one field in its stored form, so a store that keeps the
// replicated log (an EntryBodyStore, fed by ApplyEntry) refers to the
// payload where the entry holds it instead of writing it again; other
// stores (WALBodyStore, MemBodyStore) keep copies. A redrive writes
// nothing: the new message takes over the dead letter's stored payload
// where it lies (see applyRedrive and bodyKeys).
//
// Every change arrives as a Command carrying the leader's clock. Applying the
// same commands in the same order yields the same state and the same answers
// on every replica: the FSM's clock is the largest time any command carried,
// so it never runs backwards.
//
// The package must never read the wall clock, draw random numbers, start
// goroutines, touch the network, know about Raft, or let map iteration order
// influence a result or an encoded byte. An entry that cannot be decoded is a
// corrupted log and makes Apply panic: it is never skipped.
//
// An FSM is not safe for concurrent use; its owner serialises calls. The one
// exception is Snapshot: the returned Snapshot may be persisted on another
// goroutine while later commands are applied.
package fsm
