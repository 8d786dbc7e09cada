package transport

import (
	"io"
	"sync"
	"time"
)

// pacer spreads the bytes of every snapshot a node streams over time so
// that together they stay within a byte rate: a node rebuilding many
// replicas at once must not take the network and disk that its live
// partitions need. Each write reserves its slot in one shared schedule
// and sleeps until the slot starts; nothing is buffered.
type pacer struct {
	bytesPerSecond int64 // <= 0: unlimited
	mu             sync.Mutex
	next           time.Time // when the schedule is free again
	sent           uint64    // bytes passed, for Stats
}

// pacerBurst is how far the schedule may lag behind now: a pacer idle for
// a while lets this much through at once, no more.
const pacerBurst = 100 * time.Millisecond

// reserve books n bytes and returns how long to wait before sending them.
func (p *pacer) reserve(n int) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sent += uint64(n)
	if p.bytesPerSecond <= 0 {
		return 0
	}
	now := time.Now()
	if p.next.Before(now.Add(-pacerBurst)) {
		p.next = now.Add(-pacerBurst)
	}
	start := p.next
	p.next = p.next.Add(time.Duration(int64(n) * int64(time.Second) / p.bytesPerSecond))
	return start.Sub(now)
}

// bytesSent returns the bytes paced so far.
func (p *pacer) bytesSent() uint64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.sent
}

// pacedWriter writes through a pacer, stopping early when done closes.
type pacedWriter struct {
	w    io.Writer
	p    *pacer
	done <-chan struct{}
}

// pacedChunkBytes bounds one write, so that one large write cannot book
// seconds of the schedule ahead of the others.
const pacedChunkBytes = 64 << 10

func (pw *pacedWriter) Write(b []byte) (int, error) {
	written := 0
	for len(b) > 0 {
		n := min(len(b), pacedChunkBytes)
		if wait := pw.p.reserve(n); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-pw.done:
				t.Stop()
				return written, ErrMuxClosed
			}
		}
		m, err := pw.w.Write(b[:n])
		written += m
		if err != nil {
			return written, err
		}
		b = b[n:]
	}
	return written, nil
}
