package transport

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"

	"github.com/hashicorp/raft"
)

// Limits on what a decoded RPC may hold. A frame is bounded by
// SharedConfig.MaxFrameBytes as a whole; these bound its parts, so that a
// peer's frame cannot make the decoder allocate more than the frame's own
// size in structures.
const (
	// maxEntriesPerAppend is the most entries one AppendEntries request
	// may carry: raft's own ceiling for MaxAppendEntries.
	maxEntriesPerAppend = 1024
	// maxHeaderBytes bounds an RPC header's id and address fields, and a
	// request's leader and candidate fields.
	maxHeaderBytes = 1024
	// maxConfigBytes bounds an InstallSnapshot request's configuration.
	maxConfigBytes = 1 << 20
)

// encoder appends the fields of an RPC to a byte slice: unsigned integers
// as uvarints, byte slices as a uvarint of length+1 (0 for nil, so that nil
// and empty stay apart: raft tells a heartbeat by a non-nil leader) and
// then the bytes.
type encoder struct{ b []byte }

func (e *encoder) uint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }

func (e *encoder) bool(v bool) {
	if v {
		e.b = append(e.b, 1)
	} else {
		e.b = append(e.b, 0)
	}
}

func (e *encoder) bytes(p []byte) {
	if p == nil {
		e.uint(0)
		return
	}
	e.uint(uint64(len(p)) + 1)
	e.b = append(e.b, p...)
}

func (e *encoder) header(h raft.RPCHeader) {
	e.uint(uint64(h.ProtocolVersion))
	e.bytes(h.ID)
	e.bytes(h.Addr)
}

// decoder reads what encoder wrote. The first failure sticks: later reads
// return zero values, and err tells what was wrong. Byte slices alias the
// decoded buffer, which the caller must not reuse.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: "+format, append([]any{ErrBadFrame}, args...)...)
	}
}

func (d *decoder) uint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("truncated or overlong integer")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) bool() bool {
	switch v := d.uint(); v {
	case 0:
		return false
	case 1:
		return true
	default:
		d.fail("boolean %d", v)
		return false
	}
}

// bytes reads a byte slice of at most maxLen bytes.
func (d *decoder) bytes(maxLen int) []byte {
	n := d.uint()
	if d.err != nil || n == 0 {
		return nil
	}
	n--
	if n > uint64(maxLen) || n > uint64(len(d.b)) {
		d.fail("%d-byte field (at most %d, %d left)", n, maxLen, len(d.b))
		return nil
	}
	p := d.b[:n:n]
	d.b = d.b[n:]
	return p
}

func (d *decoder) header() raft.RPCHeader {
	v := d.uint()
	if v > math.MaxInt32 {
		d.fail("protocol version %d", v)
	}
	return raft.RPCHeader{ProtocolVersion: raft.ProtocolVersion(v), ID: d.bytes(maxHeaderBytes), Addr: d.bytes(maxHeaderBytes)}
}

// end reports an error unless the whole buffer was read.
func (d *decoder) end() error {
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d bytes after the last field", len(d.b))
	}
	return d.err
}

// appendTime encodes a log's AppendedAt: 0 for the zero time, else 1 and
// the Unix nanoseconds (zigzag).
func (e *encoder) time(t time.Time) {
	if t.IsZero() {
		e.uint(0)
		return
	}
	e.uint(1)
	ns := t.UnixNano()
	e.uint(uint64(ns<<1) ^ uint64(ns>>63))
}

func (d *decoder) time() time.Time {
	switch d.uint() {
	case 0:
		return time.Time{}
	case 1:
		z := d.uint()
		return time.Unix(0, int64(z>>1)^-int64(z&1))
	default:
		d.fail("bad time tag")
		return time.Time{}
	}
}

func encodeAppendRequest(e *encoder, r *raft.AppendEntriesRequest) {
	e.header(r.RPCHeader)
	e.uint(r.Term)
	//lint:ignore SA1019 raft still sets and reads the deprecated field; it must travel
	e.bytes(r.Leader)
	e.uint(r.PrevLogEntry)
	e.uint(r.PrevLogTerm)
	e.uint(r.LeaderCommitIndex)
	e.bool(r.Quiesce)
	e.uint(uint64(len(r.Entries)))
	for _, l := range r.Entries {
		e.uint(l.Index)
		e.uint(l.Term)
		e.uint(uint64(l.Type))
		e.bytes(l.Data)
		e.bytes(l.Extensions)
		e.time(l.AppendedAt)
	}
}

func decodeAppendRequest(d *decoder, r *raft.AppendEntriesRequest) {
	r.RPCHeader = d.header()
	r.Term = d.uint()
	//lint:ignore SA1019 raft still sets and reads the deprecated field; it must travel
	r.Leader = d.bytes(maxHeaderBytes)
	r.PrevLogEntry = d.uint()
	r.PrevLogTerm = d.uint()
	r.LeaderCommitIndex = d.uint()
	r.Quiesce = d.bool()
	n := d.uint()
	if n > maxEntriesPerAppend {
		d.fail("%d entries (at most %d)", n, maxEntriesPerAppend)
		return
	}
	if n == 0 {
		return
	}
	logs := make([]raft.Log, n)
	r.Entries = make([]*raft.Log, n)
	for i := range logs {
		l := &logs[i]
		l.Index = d.uint()
		l.Term = d.uint()
		t := d.uint()
		if t > math.MaxUint8 {
			d.fail("log type %d", t)
		}
		l.Type = raft.LogType(t)
		l.Data = d.bytes(len(d.b))
		l.Extensions = d.bytes(len(d.b))
		l.AppendedAt = d.time()
		r.Entries[i] = l
	}
}

func encodeAppendResponse(e *encoder, r *raft.AppendEntriesResponse) {
	e.header(r.RPCHeader)
	e.uint(r.Term)
	e.uint(r.LastLog)
	e.bool(r.Success)
	e.bool(r.NoRetryBackoff)
	if r.Abstaining {
		// Written only when set: a node of a version without the field
		// reads every other answer as before (only an abstaining
		// replica's answers, which only a new replica gives, are
		// refused by it), and reads no flag as "votes".
		e.bool(true)
	}
}

func decodeAppendResponse(d *decoder, r *raft.AppendEntriesResponse) {
	r.RPCHeader = d.header()
	r.Term = d.uint()
	r.LastLog = d.uint()
	r.Success = d.bool()
	r.NoRetryBackoff = d.bool()
	r.Abstaining = len(d.b) > 0 && d.bool()
}

func encodeVoteRequest(e *encoder, r *raft.RequestVoteRequest) {
	e.header(r.RPCHeader)
	e.uint(r.Term)
	//lint:ignore SA1019 raft still sets and reads the deprecated field; it must travel
	e.bytes(r.Candidate)
	e.uint(r.LastLogIndex)
	e.uint(r.LastLogTerm)
	e.bool(r.LeadershipTransfer)
}

func decodeVoteRequest(d *decoder, r *raft.RequestVoteRequest) {
	r.RPCHeader = d.header()
	r.Term = d.uint()
	//lint:ignore SA1019 raft still sets and reads the deprecated field; it must travel
	r.Candidate = d.bytes(maxHeaderBytes)
	r.LastLogIndex = d.uint()
	r.LastLogTerm = d.uint()
	r.LeadershipTransfer = d.bool()
}

func encodeVoteResponse(e *encoder, r *raft.RequestVoteResponse) {
	e.header(r.RPCHeader)
	e.uint(r.Term)
	e.bytes(r.Peers)
	e.bool(r.Granted)
}

func decodeVoteResponse(d *decoder, r *raft.RequestVoteResponse) {
	r.RPCHeader = d.header()
	r.Term = d.uint()
	r.Peers = d.bytes(maxConfigBytes)
	r.Granted = d.bool()
}

func encodePreVoteRequest(e *encoder, r *raft.RequestPreVoteRequest) {
	e.header(r.RPCHeader)
	e.uint(r.Term)
	e.uint(r.LastLogIndex)
	e.uint(r.LastLogTerm)
}

func decodePreVoteRequest(d *decoder, r *raft.RequestPreVoteRequest) {
	r.RPCHeader = d.header()
	r.Term = d.uint()
	r.LastLogIndex = d.uint()
	r.LastLogTerm = d.uint()
}

func encodePreVoteResponse(e *encoder, r *raft.RequestPreVoteResponse) {
	e.header(r.RPCHeader)
	e.uint(r.Term)
	e.bool(r.Granted)
}

func decodePreVoteResponse(d *decoder, r *raft.RequestPreVoteResponse) {
	r.RPCHeader = d.header()
	r.Term = d.uint()
	r.Granted = d.bool()
}

func encodeSnapshotRequest(e *encoder, r *raft.InstallSnapshotRequest) {
	e.header(r.RPCHeader)
	e.uint(uint64(r.SnapshotVersion))
	e.uint(r.Term)
	e.bytes(r.Leader)
	e.uint(r.LastLogIndex)
	e.uint(r.LastLogTerm)
	e.bytes(r.Peers)
	e.bytes(r.Configuration)
	e.uint(r.ConfigurationIndex)
	e.uint(uint64(r.Size))
}

func decodeSnapshotRequest(d *decoder, r *raft.InstallSnapshotRequest) {
	r.RPCHeader = d.header()
	v := d.uint()
	if v > math.MaxInt32 {
		d.fail("snapshot version %d", v)
	}
	r.SnapshotVersion = raft.SnapshotVersion(v)
	r.Term = d.uint()
	r.Leader = d.bytes(maxHeaderBytes)
	r.LastLogIndex = d.uint()
	r.LastLogTerm = d.uint()
	r.Peers = d.bytes(maxConfigBytes)
	r.Configuration = d.bytes(maxConfigBytes)
	r.ConfigurationIndex = d.uint()
	size := d.uint()
	if size > math.MaxInt64 {
		d.fail("snapshot size %d", size)
	}
	r.Size = int64(size)
}

func encodeSnapshotResponse(e *encoder, r *raft.InstallSnapshotResponse) {
	e.header(r.RPCHeader)
	e.uint(r.Term)
	e.bool(r.Success)
}

func decodeSnapshotResponse(d *decoder, r *raft.InstallSnapshotResponse) {
	r.RPCHeader = d.header()
	r.Term = d.uint()
	r.Success = d.bool()
}

func encodeTimeoutNowRequest(e *encoder, r *raft.TimeoutNowRequest) { e.header(r.RPCHeader) }

func decodeTimeoutNowRequest(d *decoder, r *raft.TimeoutNowRequest) { r.RPCHeader = d.header() }

func encodeTimeoutNowResponse(e *encoder, r *raft.TimeoutNowResponse) { e.header(r.RPCHeader) }

func decodeTimeoutNowResponse(d *decoder, r *raft.TimeoutNowResponse) { r.RPCHeader = d.header() }

// isHeartbeat reports whether an AppendEntries request is a heartbeat, by
// the test raft's own network transport uses for its fast path: a term and
// a leader, and no log position, entries or commit index.
func isHeartbeat(r *raft.AppendEntriesRequest) bool {
	leader := r.Addr
	if len(leader) == 0 {
		//lint:ignore SA1019 raft still sets and reads the deprecated field; it must travel
		leader = r.Leader
	}
	return r.Term != 0 && leader != nil && r.PrevLogEntry == 0 && r.PrevLogTerm == 0 &&
		len(r.Entries) == 0 && r.LeaderCommitIndex == 0
}
