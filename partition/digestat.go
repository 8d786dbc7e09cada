package partition

import (
	"context"
	"errors"
	"fmt"
)

// Errors of DigestAt.
var (
	// ErrDigestPassed is returned by DigestAt when the replica had already
	// applied past the index asked for: its state there is gone. Ask again
	// for a later index.
	ErrDigestPassed = errors.New("replica already applied past that index")
	// ErrDigestBusy is returned by DigestAt when digestWaitsMax requests
	// already wait on this replica.
	ErrDigestBusy = errors.New("too many digest requests waiting")
)

// digestWaitsMax bounds the DigestAt requests waiting on one replica.
const digestWaitsMax = 16

// digestWait is one DigestAt request: the index it waits for and where the
// digest goes (buffered: the apply path never blocks on it).
type digestWait struct {
	index uint64
	out   chan [32]byte
}

// DigestAt returns the replica's state digest right after it applied the
// raft entry at index, waiting for that entry until ctx ends. Replicas of a
// group that applied the same entries have the same digest there, however
// far each has gone since: comparing digests at one index tells whether
// replicas agree on a group that keeps applying entries (ticks, for
// instance), where digests read at one moment always differ by the entry
// in flight. It fails with ErrDigestPassed if the replica applied past
// index before the call (or a snapshot took it past), and with
// ErrDigestBusy beyond digestWaitsMax waiting requests.
func (p *Partition) DigestAt(ctx context.Context, index uint64) ([32]byte, error) {
	p.mu.Lock()
	switch {
	case p.applied == index:
		d := p.fsm.Digest()
		p.mu.Unlock()
		return d, nil
	case p.applied > index:
		applied := p.applied
		p.mu.Unlock()
		return [32]byte{}, fmt.Errorf("%w: asked for %d, applied %d", ErrDigestPassed, index, applied)
	case len(p.digestWaits) >= digestWaitsMax:
		p.mu.Unlock()
		return [32]byte{}, ErrDigestBusy
	}
	w := &digestWait{index: index, out: make(chan [32]byte, 1)}
	p.digestWaits = append(p.digestWaits, w)
	p.mu.Unlock()
	select {
	case d, ok := <-w.out:
		if !ok {
			return [32]byte{}, fmt.Errorf("%w: a snapshot took the replica past %d", ErrDigestPassed, index)
		}
		return d, nil
	case <-ctx.Done():
		p.mu.Lock()
		for i, o := range p.digestWaits {
			if o == w {
				p.digestWaits = append(p.digestWaits[:i], p.digestWaits[i+1:]...)
				break
			}
		}
		p.mu.Unlock()
		return [32]byte{}, ctx.Err()
	case <-p.closing:
		return [32]byte{}, ErrClosed
	}
}

// serveDigestWaitsLocked answers the DigestAt requests for the index just
// applied and closes those the replica went past (a snapshot restore).
// p.mu held.
func (p *Partition) serveDigestWaitsLocked() {
	if len(p.digestWaits) == 0 {
		return
	}
	kept := p.digestWaits[:0]
	var digest *[32]byte
	for _, w := range p.digestWaits {
		switch {
		case w.index == p.applied:
			if digest == nil {
				d := p.fsm.Digest()
				digest = &d
			}
			w.out <- *digest
		case w.index < p.applied:
			close(w.out)
		default:
			kept = append(kept, w)
		}
	}
	clear(p.digestWaits[len(kept):])
	p.digestWaits = kept
}
