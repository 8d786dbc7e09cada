// Package transport carries the Raft traffic of every Raft group hosted by
// one node over a single TCP port, and over a few connections per peer.
//
// hashicorp/raft has no multi-raft support: each raft.Raft needs its own
// raft.Transport. A node runs one group per hosted partition replica plus
// the meta group. A Mux listens on the node's one Raft address and
// authenticates every connection (mutual TLS). On it:
//
//   - Shared (the node's transport, used by node/) gives every group a
//     raft.Transport, GroupTransport, whose RPCs travel on connections the
//     node shares with all its other groups: per peer, one control
//     connection (coalesced heartbeats, votes, pre-votes, TimeoutNow), one
//     bulk connection (appends), and one short-lived connection per
//     snapshot being sent. Frames are tagged with their group. A group
//     owns no connection, no buffer and no goroutine while idle.
//   - StreamLayer (Mux.Group) is one group's virtual listener, for a
//     raft.NetworkTransport of its own (NewTransport): a pool, a pipeline
//     and 256 KiB buffers per group and peer. It is kept for tests and
//     tools that run single groups.
//
// # The shared transport
//
// Frames: [length u32][kind u8][request id u64][group id length u8][group
// id][payload]. RPC payloads are encoded by hand (codec.go), every field
// range-checked on decode; a frame over SharedConfig.MaxFrameBytes, of an
// unknown kind or of the wrong class closes its connection. Requests flow
// from the dialing node; answers come back on the same connection with
// the request's id, in any order.
//
// Heartbeats of all groups to a peer wait SharedConfig.HeartbeatLinger
// (10 ms) for each other and leave in one frame; the receiver hands each
// to its own group's raft (raft's heartbeat fast path) and returns every
// group's own answer in one frame. A node never answers for a group: a
// heartbeat its group cannot answer is failed, not acknowledged.
//
// Isolation: the receiving side never blocks its reader on a group.
// Appends queue per group (MaxQueuedPerGroup, one goroutine per group
// only while its queue is not empty, so a group's appends stay in order);
// beyond the bound, or beyond MaxQueuedBytes per connection, an append is
// answered ErrBusy at once and raft retries. Votes and TimeoutNow run on
// goroutines of their own (at most 256 per connection). Heartbeats and
// votes never wait behind appends, which travel on the bulk connection;
// snapshots travel on connections of their own. A lost connection fails
// only the RPCs in flight on it; the next RPC dials again, one dial per
// peer and class at a time, and a failed dial is reported to every caller
// for RedialAfter (100 ms), so thousands of groups never dial a dead node
// at once. Calls carry no timer: one sweeper per node fails those past
// SharedConfig.Timeout.
//
// Liveness: Shared.PeerAlive (raft.Liveness, which quiescing groups rely
// on) probes each peer somebody asked about on its control connection
// every ProbeInterval (200 ms); the peer is alive while it answered
// anything on any of its connections within ProbeTimeout (2.5 s), and
// lost at once when its control connection fails. The probes cost a few
// frames a second per peer node, whatever the number of groups.
//
// # What the package owns
//
// The shared listening socket, the connection header that names the group
// of every connection, routing of accepted connections to the group they
// name, and the lifetime of every connection it accepted or dialed: closing
// a group force-closes that group's connections, closing the Mux closes
// everything. Raft's hclog logging reaches log/slog through
// internal/raftutil's bridge.
//
// # What it must never do
//
//   - Know about queues, partitions, placement or node membership. A group
//     id is an opaque string chosen by the caller (see ValidateGroupID).
//   - Close the shared socket, or another group's connections, from a
//     group. StreamLayer.Close, and so raft.NetworkTransport.Close, only
//     stops that group; only Mux.Close closes the socket.
//   - Interpret the bytes after the header. They belong to raft.
//
// # Connection header
//
// Every connection dialed by StreamLayer.Dial starts with:
//
//	["FRYR" 4 bytes][version 1 byte = 1][group id length n 1 byte][group id n bytes]
//
// and every connection of the shared transport with:
//
//	["FRYR" 4 bytes][version 1 byte = 2][class 1 byte: 1 control, 2 bulk, 3 snapshot]
//
// Nodes of a cluster must run the same kind of transport: a node of an
// older version, which dials one connection per group, finds no group
// registered on a newer node.
//
// The accepting Mux reads it under a deadline of MuxConfig.HandshakeTimeout,
// clears the deadline, and hands the connection to the named group's
// StreamLayer.Accept. A bad magic, an unknown version, an invalid group id,
// a group that is not registered on this node, or a header that does not
// arrive in time closes the connection; this is logged at debug level only,
// because it is routine while groups start and stop. The dialer is not told
// why: it sees the connection closed on its first RPC and raft retries.
//
// # TLS
//
// With MuxConfig.ServerTLS and ClientTLS set, every connection is TLS from
// its first byte: the accepting Mux completes the handshake under
// HandshakeTimeout before it reads the header, and the dialer completes it
// before it writes the header. ServerTLS must require and verify a client
// certificate, so a peer without a certificate from the cluster CA is
// refused before any header or raft byte is read (counted in
// Stats.TLSRefused, logged at warn level at most every 10 seconds). The
// package takes the configs as given; internal/tlsconf builds them.
//
// # Bounds
//
// Every group of a node dials its peers on its own connections (raft keeps
// a pool, a pipeline and heartbeats per group and peer), so a node that
// starts hundreds of groups at once dials thousands of connections. Two
// bounds keep that from feeding on itself:
//
//   - MuxConfig.MaxDialing (32) connections are set up at once per node;
//     further dials wait for a slot within their timeout (ErrDialBusy).
//     Unbounded, the TLS handshakes shared the CPU until they timed out and
//     raft dialed again: a three-node test restarting 100 partitions in
//     one process held 16,000-20,000 descriptors at its peak; bounded, it
//     holds about 4,000, and its leaders are back in 2-3 s instead of 6-9.
//   - MuxConfig.MaxHandshakes (512) accepted connections may be in
//     handshake at once, MaxHandshakesPerIP (128) from one IP; beyond, a
//     connection is closed at once (Stats.Busy), so a peer without a
//     certificate cannot exhaust the node's descriptors or goroutines.
//
// internal/tlsconf's raft dial config keeps TLS sessions, so most
// connections after the first to a peer resume instead of signing and
// verifying certificates again (the peer's chain is still checked).
//
// # Addresses
//
// The advertised address (MuxConfig.AdvertiseAddr, by default the bound
// address) is what StreamLayer.Addr returns and so what raft uses as the
// local server address. Outgoing connections are bound to the node's own IP
// (the bound IP, or the advertised IP when binding to all interfaces), so
// that with one loopback IP per node, as in the chaos tests, the source IP
// on the wire identifies the node.
//
// # Goroutines
//
// A Mux runs one accept goroutine, plus one short-lived goroutine per
// connection that is still sending its header (at most HandshakeTimeout,
// and at most MaxHandshakes of them). A Shared runs one sweeper, and one
// reader per open connection (a handful per peer); a group's goroutines
// exist only while it has appends queued, a pipeline whose answers raft
// is slow to take, or a vote being served. A pipeline's answers are
// handed to raft by the reader that reads them (converted on the way when
// a request went in parts, see BoundedTransport), so an answer reaches
// raft's decoder with one goroutine hand-off; only when raft has not
// taken earlier answers does a goroutine wait on raft for the rest. On
// the follower's side raft's goroutine writes its answer to an append
// itself when that cannot block (Linux: the socket's send queue is
// empty, read with SIOCOUTQ); otherwise an answer writer goroutine runs
// while answers wait. raft's NetworkTransport, where used, runs one per
// accepted connection and one listener per group.
package transport
