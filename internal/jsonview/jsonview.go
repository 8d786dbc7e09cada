// Package jsonview is the one JSON form of Ferry's admin views. The HTTP
// admin API (node) and `ferry --json` (cmd/ferry) both render through it,
// so the same queue, node or figure reads the same in both.
//
// Conventions, for every view:
//   - keys are snake_case;
//   - durations are Go duration strings ("30s", "1m30s", "0s");
//   - enums are lower-case names with underscores ("alive", "leader",
//     "retries_exhausted", "queue_not_found");
//   - timestamps are RFC 3339 in UTC with sub-second digits as needed; a
//     time that never happened is left out;
//   - a limit that may be unlimited (max_receives, max_depth, max_bytes,
//     retention, dedup_window, max_dead, max_dead_bytes, dead_retention,
//     dedup_max_ids) is 0 for "no limit" or "off": never null,
//     never -1;
//   - lists are [] when empty, never null.
//
// The package imports only wire and the standard library.
package jsonview

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/ferrymq/ferry/wire"
)

// Duration is a time.Duration that reads and writes as a Go duration
// string.
type Duration time.Duration

// MarshalJSON writes the duration as a string such as "30s".
func (d Duration) MarshalJSON() ([]byte, error) {
	return json.Marshal(time.Duration(d).String())
}

// UnmarshalJSON reads a duration string such as "30s".
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("duration: want a string such as \"30s\": %w", err)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("duration: %w", err)
	}
	*d = Duration(v)
	return nil
}

// Time renders t as RFC 3339 in UTC, or "" for the zero time (left out by
// the views' omitempty).
func Time(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// UnixTime renders Unix nanoseconds as Time does; 0 is "never".
func UnixTime(ns int64) string {
	if ns == 0 {
		return ""
	}
	return Time(time.Unix(0, ns))
}

// Enum turns a human enum name ("retries exhausted", "Leader") into its
// JSON form ("retries_exhausted", "leader").
func Enum(name string) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimSpace(name)), " ", "_")
}

// QueueConfig is a queue's configuration in force. Its JSON is an object
// with one key per wire.QueueConfig field, named and ordered as the wire
// names them (see wire.ConfigFieldList), so a new setting appears here
// without a change to this package; durations are duration strings. 0
// means "no limit", "off" or "keep" where the setting says so.
type QueueConfig struct{ wire.QueueConfig }

// ConfigOf renders a wire config; the values are carried over unchanged.
func ConfigOf(c wire.QueueConfig) QueueConfig { return QueueConfig{c} }

// MarshalJSON writes the settings in field order.
func (c QueueConfig) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, f := range wire.ConfigFieldList() {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendQuote(b, f.Name)
		b = append(b, ':')
		v := c.Get(f.Field)
		if f.Duration {
			b = strconv.AppendQuote(b, time.Duration(v).String())
		} else {
			b = strconv.AppendInt(b, v, 10)
		}
	}
	return append(b, '}'), nil
}

// UnmarshalJSON reads what MarshalJSON writes. Keys this version does not
// know are ignored, so a newer server's output still reads.
func (c *QueueConfig) UnmarshalJSON(b []byte) error {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*c = QueueConfig{}
	for _, f := range wire.ConfigFieldList() {
		r, ok := raw[f.Name]
		if !ok {
			continue
		}
		var v int64
		var err error
		if f.Duration {
			var d Duration
			err = d.UnmarshalJSON(r)
			v = int64(d)
		} else {
			err = json.Unmarshal(r, &v)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", f.Name, err)
		}
		c.Set(f.Field, v)
	}
	return nil
}

// Partition is the placement of one partition. Leader and leader_addr
// are "" while no leader is known.
type Partition struct {
	Index      int      `json:"index"`
	Leader     string   `json:"leader"`
	LeaderAddr string   `json:"leader_addr"`
	Replicas   []string `json:"replicas"`
}

// Queue is one queue: its name, configuration and partitions by index.
type Queue struct {
	Name       string      `json:"name"`
	Config     QueueConfig `json:"config"`
	Partitions []Partition `json:"partitions"`
}

// QueueOf renders a wire queue description.
func QueueOf(q wire.QueueInfo) Queue {
	out := Queue{Name: q.Name, Config: ConfigOf(q.Config), Partitions: []Partition{}}
	for _, p := range q.Partitions {
		out.Partitions = append(out.Partitions, Partition{Index: p.Index, Leader: p.Leader, LeaderAddr: p.LeaderAddr,
			Replicas: append([]string{}, p.Replicas...)})
	}
	return out
}

// QueuesOf renders a list of queues; nil gives [].
func QueuesOf(qs []wire.QueueInfo) []Queue {
	out := make([]Queue, 0, len(qs))
	for _, q := range qs {
		out = append(out, QueueOf(q))
	}
	return out
}

// Node is one cluster member; state is "alive", "suspect", "dead", "left"
// or "unknown".
type Node struct {
	ID         string `json:"id"`
	State      string `json:"state"`
	ClientAddr string `json:"client_addr"`
	RaftAddr   string `json:"raft_addr"`
	HTTPAddr   string `json:"http_addr"`
}

// NodeOf renders a wire node description.
func NodeOf(n wire.NodeInfo) Node {
	return Node{ID: n.ID, State: Enum(n.State.String()), ClientAddr: n.ClientAddr, RaftAddr: n.RaftAddr, HTTPAddr: n.HTTPAddr}
}

// Cluster is the membership and the placement of every queue. Node (the
// answering node), meta_leader and meta_index are given by the HTTP API,
// which knows them, and left out by the CLI.
type Cluster struct {
	Node       string  `json:"node,omitempty"`
	MetaLeader string  `json:"meta_leader,omitempty"`
	MetaIndex  uint64  `json:"meta_index,omitempty"`
	Nodes      []Node  `json:"nodes"`
	Queues     []Queue `json:"queues"`
}

// ClusterOf renders nodes and queues; the caller fills the HTTP-only
// fields.
func ClusterOf(nodes []wire.NodeInfo, queues []wire.QueueInfo) Cluster {
	out := Cluster{Nodes: make([]Node, 0, len(nodes)), Queues: QueuesOf(queues)}
	for _, n := range nodes {
		out.Nodes = append(out.Nodes, NodeOf(n))
	}
	return out
}

// Error is a failure carried inside a view: its code by name and its
// message.
type Error struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// ErrorOf renders a wire code and message, or nil for CodeOK.
func ErrorOf(code wire.Code, message string) *Error {
	if code == wire.CodeOK {
		return nil
	}
	return &Error{Code: Enum(code.String()), Message: message}
}

// Counters are a partition's monotonic event counts.
type Counters struct {
	Sent             uint64 `json:"sent"`
	Duplicates       uint64 `json:"duplicates"`
	Leased           uint64 `json:"leased"`
	Acked            uint64 `json:"acked"`
	Nacked           uint64 `json:"nacked"`
	Rejected         uint64 `json:"rejected"`
	Expired          uint64 `json:"expired"`
	DeadLettered     uint64 `json:"dead_lettered"`
	Redriven         uint64 `json:"redriven"`
	DeadDeleted      uint64 `json:"dead_deleted"`
	Purged           uint64 `json:"purged"`
	RetentionExpired uint64 `json:"retention_expired"`
	DeadEvicted      uint64 `json:"dead_evicted"`
	DeadExpired      uint64 `json:"dead_expired"`
	DedupEvicted     uint64 `json:"dedup_evicted"`
}

// Figures are the gauges and counters of a partition or a sum of them.
// Ready, in_flight, delayed and dead mean the same in every view that has
// them (stats and /v1/replicas).
type Figures struct {
	Ready             int64    `json:"ready"`
	Eligible          int64    `json:"eligible"`
	Delayed           int64    `json:"delayed"`
	InFlight          int64    `json:"in_flight"`
	Dead              int64    `json:"dead"`
	Bytes             int64    `json:"bytes"`
	DeadBytes         int64    `json:"dead_bytes"`
	OldestEligibleAge Duration `json:"oldest_eligible_age"`
	Groups            int64    `json:"groups"`
	LastSeq           uint64   `json:"last_seq"`
	Counters          Counters `json:"counters"`
	// Paused is set while deliveries are paused (in a total: any
	// partition), by the token PausedBy names, since PausedAt.
	Paused   bool   `json:"paused"`
	PausedBy string `json:"paused_by,omitempty"`
	PausedAt string `json:"paused_at,omitempty"`
}

func figuresOf(s wire.PartitionStats) Figures {
	c := s.Counters
	f := Figures{
		Ready: s.Ready, Eligible: s.Eligible, Delayed: s.Delayed, InFlight: s.InFlight, Dead: s.Dead,
		Bytes: s.Bytes, DeadBytes: s.DeadBytes, OldestEligibleAge: Duration(s.OldestEligibleAge),
		Groups: s.Groups, LastSeq: s.LastSeq,
		Counters: Counters{Sent: c.Sent, Duplicates: c.Duplicates, Leased: c.Leased, Acked: c.Acked,
			Nacked: c.Nacked, Rejected: c.Rejected, Expired: c.Expired, DeadLettered: c.DeadLettered,
			Redriven: c.Redriven, DeadDeleted: c.DeadDeleted, Purged: c.Purged, RetentionExpired: c.RetentionExpired,
			DeadEvicted: c.DeadEvicted, DeadExpired: c.DeadExpired, DedupEvicted: c.DedupEvicted},
		Paused: s.Paused, PausedBy: s.PausedBy,
	}
	if s.Paused {
		f.PausedAt = Time(time.Unix(0, s.PausedAt))
	}
	return f
}

// Pause is a queue's pause state after a pause or resume: how many of its
// partitions are paused, by whom and since when.
type Pause struct {
	Queue      string `json:"queue"`
	Partitions int    `json:"partitions"`
	Paused     int    `json:"paused"`
	PausedBy   string `json:"paused_by,omitempty"`
	PausedAt   string `json:"paused_at,omitempty"`
}

// PauseOf renders a pause or resume's outcome.
func PauseOf(queue string, partitions, paused int, by string, at time.Time) Pause {
	return Pause{Queue: queue, Partitions: partitions, Paused: paused, PausedBy: by, PausedAt: Time(at)}
}

// PartitionStats are one partition's figures, flattened next to its
// index, the leader that reported them and the log index they reflect.
// Error is set, and the figures are zero, when they could not be
// gathered.
type PartitionStats struct {
	Partition    int    `json:"partition"`
	Error        *Error `json:"error,omitempty"`
	Leader       string `json:"leader"`
	AppliedIndex uint64 `json:"applied_index"`
	Figures
}

// Stats are a queue's figures per partition and their sum.
type Stats struct {
	Queue      string           `json:"queue"`
	Partitions []PartitionStats `json:"partitions"`
	Total      Figures          `json:"total"`
}

// StatsOf renders a stats answer.
func StatsOf(r wire.QueueStatsResponse) Stats {
	out := Stats{Queue: r.Queue, Partitions: make([]PartitionStats, 0, len(r.Partitions)), Total: figuresOf(r.Total())}
	for _, p := range r.Partitions {
		out.Partitions = append(out.Partitions, PartitionStats{Partition: p.Partition, Error: ErrorOf(p.Code, p.Error),
			Leader: p.Leader, AppliedIndex: p.AppliedIndex, Figures: figuresOf(p)})
	}
	return out
}

// Replica is one local partition replica as a node's /v1/replicas shows
// it: role is the replica's Raft role ("leader", "follower",
// "candidate", "shutdown"), digest the hex digest of its state at
// applied_index.
type Replica struct {
	Queue        string `json:"queue"`
	Partition    int    `json:"partition"`
	Group        string `json:"group"`
	Role         string `json:"role"`
	Leader       string `json:"leader"`
	AppliedIndex uint64 `json:"applied_index"`
	Digest       string `json:"digest"`
	Ready        int64  `json:"ready"`
	InFlight     int64  `json:"in_flight"`
	Delayed      int64  `json:"delayed"`
	Dead         int64  `json:"dead"`
	// Suffrage is "voter", "nonvoter" (a learner catching up) or "none"
	// (not in its group's latest configuration: leaving, or not added
	// yet), as the replica's own latest configuration says.
	Suffrage string `json:"suffrage"`
	// Abstaining is set while the replica may not vote: it is joining
	// (new, or on a node that lost its data) and not recorded caught up.
	Abstaining bool `json:"abstaining,omitempty"`
	// Voters, on the leader only, lists the voters of its group's latest
	// configuration (the membership commits are counted against).
	Voters []string `json:"voters,omitempty"`
}

// ReplicaSummary counts a node's partition replicas by raft role, as
// GET /v1/replicas/summary reports them: cheap enough to poll at
// thousands of replicas (no digest, no stats). WithoutLeader counts the
// replicas that know no leader of their group (an election pending).
type ReplicaSummary struct {
	Replicas      int `json:"replicas"`
	Leaders       int `json:"leaders"`
	Followers     int `json:"followers"`
	Candidates    int `json:"candidates"`
	WithoutLeader int `json:"without_leader"`
}

// Event is one entry of a dead letter's failure history; kind is
// "nacked", "lease_expired", "rejected" or "redriven".
type Event struct {
	Kind     string `json:"kind"`
	At       string `json:"at"`
	Attempt  uint32 `json:"attempt"`
	Consumer string `json:"consumer,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// DeadLetter is one dead letter; reason is "rejected",
// "retries_exhausted" or "lease_expired". A body that is valid UTF-8 is
// given as body, any other as body_base64; both are left out when the
// body is empty or not carried (a listing has no bodies), as are headers.
type DeadLetter struct {
	Partition        int               `json:"partition"`
	Seq              uint64            `json:"seq"`
	ID               string            `json:"id"`
	Group            string            `json:"group"`
	Headers          map[string]string `json:"headers,omitempty"`
	Body             string            `json:"body,omitempty"`
	BodyBase64       []byte            `json:"body_base64,omitempty"`
	Bytes            int               `json:"bytes"`
	Attempts         uint32            `json:"attempts"`
	FirstEnqueuedAt  string            `json:"first_enqueued_at,omitempty"`
	EnqueuedAt       string            `json:"enqueued_at,omitempty"`
	FirstDeliveredAt string            `json:"first_delivered_at,omitempty"`
	LastDeliveredAt  string            `json:"last_delivered_at,omitempty"`
	DeadAt           string            `json:"dead_at,omitempty"`
	Reason           string            `json:"reason"`
	ReasonText       string            `json:"reason_text"`
	LastConsumer     string            `json:"last_consumer"`
	History          []Event           `json:"history"`
	Priority         int               `json:"priority"` // 0..9, kept by a redrive
}

// SetBody fills body or body_base64 from b.
func (d *DeadLetter) SetBody(b []byte) {
	if utf8.Valid(b) {
		d.Body, d.BodyBase64 = string(b), nil
		return
	}
	d.Body, d.BodyBase64 = "", append([]byte{}, b...)
}

// Setting is one queue setting as the cluster applies it. default, min and
// max are duration strings for a duration and numbers otherwise; max is
// left out when there is no upper bound.
type Setting struct {
	Name    string `json:"name"`
	Kind    string `json:"kind"`
	Default any    `json:"default"`
	Min     any    `json:"min"`
	Max     any    `json:"max,omitempty"`
	Zero    string `json:"zero,omitempty"`
	Help    string `json:"help"`
	Fixed   bool   `json:"fixed"`
}

// SettingValue renders v as a setting of kind reads: a duration string
// ("30s") for "duration", the number otherwise.
func SettingValue(kind string, v int64) any {
	if kind == "duration" {
		return time.Duration(v).String()
	}
	return v
}

// SettingsOf renders the cluster's queue settings.
func SettingsOf(infos []wire.SettingInfo) []Setting {
	out := make([]Setting, 0, len(infos))
	for _, s := range infos {
		v := Setting{Name: s.Name, Kind: s.Kind, Default: SettingValue(s.Kind, s.Default), Min: SettingValue(s.Kind, s.Min),
			Zero: s.Zero, Help: s.Help, Fixed: s.Fixed}
		if s.Max != 0 {
			v.Max = SettingValue(s.Kind, s.Max)
		}
		out = append(out, v)
	}
	return out
}

// FoundMessage is one message a find reports: state is "ready",
// "delayed", "leased" or "dead"; visible_at is when a delayed message
// becomes ready or a lease runs out; a dead letter has its reason and
// dead_at.
type FoundMessage struct {
	Partition  int     `json:"partition"`
	Seq        uint64  `json:"seq"`
	ID         string  `json:"id"`
	Group      string  `json:"group"`
	State      string  `json:"state"`
	Attempts   uint32  `json:"attempts"`
	EnqueuedAt string  `json:"enqueued_at,omitempty"`
	VisibleAt  string  `json:"visible_at,omitempty"`
	Consumer   string  `json:"consumer"`
	Reason     string  `json:"reason,omitempty"`
	ReasonText string  `json:"reason_text,omitempty"`
	DeadAt     string  `json:"dead_at,omitempty"`
	History    []Event `json:"history"`
	Priority   int     `json:"priority"` // 0..9
}

// FoundMessageOf renders a found message.
func FoundMessageOf(m wire.MessageInfo) FoundMessage {
	out := FoundMessage{Partition: m.Partition, Seq: m.Seq, ID: m.ID, Group: m.Group, State: m.State, Attempts: m.Attempts,
		EnqueuedAt: UnixTime(m.EnqueuedAt), Consumer: m.Consumer, History: []Event{}, Priority: int(m.Priority)}
	if m.VisibleAt != 0 {
		out.VisibleAt = UnixTime(m.VisibleAt)
	}
	if d := m.Dead; d != nil {
		out.Reason, out.ReasonText, out.DeadAt = Enum(d.Reason.String()), d.ReasonText, UnixTime(d.DeadAt)
	}
	for _, e := range m.History {
		out.History = append(out.History, Event{Kind: Enum(e.Kind.String()), At: UnixTime(e.At), Attempt: e.Attempt,
			Consumer: e.Consumer, Reason: e.Reason})
	}
	return out
}

// RaftDebug is what GET /v1/debug/raft reports (served only with the
// profiler): the node-level liveness of each peer node, as the shared
// raft transport sees it, and the state of each raft group.
type RaftDebug struct {
	Peers  []RaftPeer  `json:"peers"`
	Groups []RaftGroup `json:"groups"`
}

// RaftPeer is one peer node's liveness: probed or not, a probe in
// flight, alive, how long since it last answered, its open connections
// and dials in progress.
type RaftPeer struct {
	Addr        string `json:"addr"`
	Watched     bool   `json:"watched"`
	Probing     bool   `json:"probing"`
	Alive       bool   `json:"alive"`
	SinceAnswer string `json:"since_answer,omitempty"`
	Links       int    `json:"links"`
	Dialing     int    `json:"dialing"`
}

// RaftGroup is one raft group's state on a node: raft's own stats and,
// on the group's leader, its view of every server.
type RaftGroup struct {
	Group   string            `json:"group"`
	Stats   map[string]string `json:"stats"`
	Servers []RaftServer      `json:"servers,omitempty"`
	Ticks   *RaftTicks        `json:"ticks,omitempty"`
}

// RaftTicks is a partition replica's tick state: how far its clock and
// next deadline are from the node's clock (negative: behind), and the
// ticks it proposed as leader, failed, and the last failure.
type RaftTicks struct {
	ClockAhead    string `json:"clock_ahead"`
	DeadlineAhead string `json:"deadline_ahead,omitempty"`
	Proposed      uint64 `json:"proposed"`
	Failed        uint64 `json:"failed"`
	LastErr       string `json:"last_err,omitempty"`
}

// RaftServer is a leader's view of one server of its group: what it
// acknowledged, what is sent next, whether the leader quiesced it, what
// its answers said of abstaining ("unknown", "abstains", "votes") and how
// long ago it last answered an append or snapshot.
type RaftServer struct {
	ID          string `json:"id"`
	Suffrage    string `json:"suffrage"`
	Match       uint64 `json:"match"`
	NextIndex   uint64 `json:"next_index"`
	AckedCommit uint64 `json:"acked_commit"`
	Quiesced    bool   `json:"quiesced"`
	Abstain     string `json:"abstain"`
	AnsweredAgo string `json:"answered_ago,omitempty"`
}

// MessagesDeleted is the answer to deleting or cancelling a message by
// its id: how many messages with that id were deleted.
type MessagesDeleted struct {
	Deleted int `json:"deleted"`
}

// ReplicaDigest is a replica's state digest right after it applied one
// raft entry (GET /v1/replicas/{group}/digest?at=N).
type ReplicaDigest struct {
	Group        string `json:"group"`
	AppliedIndex uint64 `json:"applied_index"`
	Digest       string `json:"digest"`
}
