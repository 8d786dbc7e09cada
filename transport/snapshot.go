package transport

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/hashicorp/raft"
)

// A snapshot travels on a connection of its own (classSnapshot), so that
// megabytes of it never hold up another group's appends: the dialer sends
// one kindSnapshot frame with the request, then exactly Size bytes of the
// snapshot, and reads one answer frame; then the connection is closed. A
// cut connection fails only that snapshot, which raft sends again.

// snapshotDeadline is the time allowed to move a snapshot of size bytes:
// one Timeout per snapshotTimeoutScale bytes, at least one Timeout, plus
// twice what the pacing rate takes for it (other snapshots share the
// rate).
func snapshotDeadline(timeout time.Duration, size, bytesPerSecond int64) time.Time {
	scale := max(size/snapshotTimeoutScale, 1)
	d := timeout * time.Duration(scale)
	if bytesPerSecond > 0 {
		d += 2 * time.Duration(size*int64(time.Second)/bytesPerSecond)
	}
	return time.Now().Add(d)
}

// sendSnapshot streams one snapshot to the peer, within MaxSnapshotsPerPeer.
func (p *peer) sendSnapshot(group string, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	select {
	case p.snaps <- struct{}{}:
	case <-time.After(p.s.cfg.Timeout):
		return fmt.Errorf("%w: %d snapshots already being sent to %s", ErrBusy, cap(p.snaps), p.addr)
	}
	defer func() { <-p.snaps }()
	conn, raw, err := p.s.mux.dial(p.addr, p.s.cfg.Timeout, appendSharedHeader(nil, classSnapshot))
	if err != nil {
		return fmt.Errorf("transport: group %q snapshot: %w", group, err)
	}
	defer raw.Close()
	stop := p.s.closeOnShutdown(raw)
	defer stop()
	if err := conn.SetDeadline(snapshotDeadline(p.s.cfg.Timeout, args.Size, p.s.cfg.SnapshotBytesPerSecond)); err != nil {
		return err
	}
	w := bufio.NewWriterSize(conn, connBufferBytes)
	e := beginFrame(kindSnapshot, 0, group, 256)
	encodeSnapshotRequest(e, args)
	if _, err := w.Write(finishFrame(e)); err != nil {
		return fmt.Errorf("%w: group %q snapshot to %s: %w", ErrConnLost, group, p.addr, err)
	}
	if n, err := io.CopyN(&pacedWriter{w: w, p: p.s.snapshots, done: p.s.done}, data, args.Size); err != nil {
		return fmt.Errorf("%w: group %q snapshot to %s: %d of %d bytes sent: %w", ErrConnLost, group, p.addr, n, args.Size, err)
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("%w: group %q snapshot to %s: %w", ErrConnLost, group, p.addr, err)
	}
	f, err := readFrame(bufio.NewReader(conn), p.s.cfg.MaxFrameBytes)
	if err != nil {
		return fmt.Errorf("%w: group %q snapshot answer from %s: %w", ErrConnLost, group, p.addr, err)
	}
	switch f.kind {
	case kindReply:
		d := &decoder{b: f.payload}
		decodeSnapshotResponse(d, resp)
		return d.end()
	case kindError:
		return fmt.Errorf("%w: %s", ErrRemote, f.payload)
	default:
		return fmt.Errorf("%w: kind %d answering a snapshot", ErrBadFrame, f.kind)
	}
}

// closeOnShutdown closes c if the Shared closes before the returned stop
// is called.
func (s *Shared) closeOnShutdown(c io.Closer) (stop func()) {
	done := make(chan struct{})
	go func() {
		select {
		case <-s.done:
			_ = c.Close()
		case <-done:
		}
	}()
	return func() { close(done) }
}

// serveSnapshot receives one snapshot and answers it.
func (in *inbound) serveSnapshot() {
	_ = in.conn.SetReadDeadline(time.Now().Add(in.s.cfg.Timeout))
	f, err := readFrame(in.r, in.s.cfg.MaxFrameBytes)
	if err == nil && f.kind != kindSnapshot {
		err = fmt.Errorf("%w: kind %d on a snapshot connection", ErrBadFrame, f.kind)
	}
	req := new(raft.InstallSnapshotRequest)
	if err == nil {
		d := &decoder{b: f.payload}
		decodeSnapshotRequest(d, req)
		err = d.end()
	}
	if err != nil {
		in.s.log.Warn("snapshot connection closed: bad request", "remote", in.raw.RemoteAddr().String(), "err", err)
		return
	}
	_ = in.conn.SetDeadline(snapshotDeadline(in.s.cfg.Timeout, req.Size, in.s.cfg.SnapshotBytesPerSecond))
	g := in.s.group(f.group)
	if g == nil {
		in.replyError(0, fmt.Errorf("%w: %q", ErrUnknownGroup, f.group))
		return
	}
	resp, err := g.deliver(raft.RPC{Command: req, Reader: io.LimitReader(in.r, req.Size)})
	if err != nil {
		if !errors.Is(err, ErrGroupClosed) {
			in.s.log.Debug("snapshot refused", "group", f.group, "err", err)
		}
		in.replyError(0, err)
		return
	}
	(&inboundRPC{in: in}).answer(resp, nil)
}
