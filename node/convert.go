package node

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/ferrymq/ferry/fsm"
	"github.com/ferrymq/ferry/meta"
	"github.com/ferrymq/ferry/partition"
	"github.com/ferrymq/ferry/wire"
)

// codeOf maps an error of any layer to its stable wire code.
func codeOf(err error) wire.Code {
	var we *wire.Error
	switch {
	case err == nil:
		return wire.CodeOK
	case errors.As(err, &we):
		return we.Code
	case errors.Is(err, partition.ErrNotLeader):
		return wire.CodeNotLeader
	case errors.Is(err, partition.ErrUnknownOutcome), errors.Is(err, context.DeadlineExceeded):
		return wire.CodeTimeout
	case errors.Is(err, partition.ErrTimeout), errors.Is(err, partition.ErrClosed), errors.Is(err, partition.ErrIO), errors.Is(err, partition.ErrClockUnverified), errors.Is(err, fsm.ErrClockStep), errors.Is(err, ErrClosed), errors.Is(err, ErrNoMetaLeader):
		return wire.CodeUnavailable
	case errors.Is(err, fsm.ErrInvalidConfig):
		return wire.CodeInvalidConfig
	case errors.Is(err, fsm.ErrInvalidArgument), errors.Is(err, meta.ErrInvalidArgument), errors.Is(err, meta.ErrInvalidName),
		errors.Is(err, meta.ErrNodeNotFound), errors.Is(err, meta.ErrNodeRemoved):
		return wire.CodeInvalidArgument
	case errors.Is(err, meta.ErrNotEnoughNodes):
		return wire.CodeInvalidConfig
	case errors.Is(err, fsm.ErrMessageTooLarge):
		return wire.CodeMessageTooLarge
	case errors.Is(err, fsm.ErrQueueFull), errors.Is(err, partition.ErrDiskFull):
		return wire.CodeQueueFull
	case errors.Is(err, fsm.ErrLeaseLost):
		return wire.CodeLeaseLost
	case errors.Is(err, fsm.ErrNotFound):
		return wire.CodeMessageNotFound
	case errors.Is(err, meta.ErrQueueNotFound):
		return wire.CodeQueueNotFound
	case errors.Is(err, meta.ErrQueueExists):
		return wire.CodeQueueExists
	case errors.Is(err, meta.ErrLimitExceeded):
		return wire.CodeLimitExceeded
	}
	return wire.CodeInternal
}

// wireError turns err into a *wire.Error; a not-leader error carries the
// leader's client address so the client can go there directly.
func (n *Node) wireError(err error) *wire.Error {
	var we *wire.Error
	if errors.As(err, &we) {
		return n.unlessCatalogBehind(we)
	}
	out := &wire.Error{Code: codeOf(err), Message: err.Error()}
	var nl *partition.NotLeaderError
	switch {
	case errors.As(err, &nl) && nl.LeaderID == n.cfg.ID:
		// A replica that lost its quorum may still name itself as the
		// leader it last knew; it cannot serve, and pointing the client
		// back here would say something false.
		return &wire.Error{Code: wire.CodeUnavailable, Message: "no leader: this node led last but has no quorum now"}
	case errors.As(err, &nl) && nl.LeaderID != "":
		out.Leader = n.clientAddrOf(nl.LeaderID)
	}
	return n.unlessCatalogBehind(out)
}

// unlessCatalogBehind turns "queue not found" into "unavailable" while the
// node's catalog has not caught up with the meta group (a restarted node
// until the meta leader reaches it, a node cut off from it): such a node
// cannot tell a missing queue from one it has not learned of yet, and
// clients take "queue not found" as final but retry "unavailable".
func (n *Node) unlessCatalogBehind(we *wire.Error) *wire.Error {
	if we.Code != wire.CodeQueueNotFound || n.meta.caughtUp() {
		return we
	}
	return &wire.Error{Code: wire.CodeUnavailable, Message: "catalog not caught up with the meta group: " + we.Message}
}

// itemResult is the per-item form of err.
func itemResult(err error) wire.ItemResult {
	if err == nil {
		return wire.ItemResult{}
	}
	return wire.ItemResult{Code: codeOf(err), Error: err.Error()}
}

// clientAddrOf maps a node id to its client address via the catalog, or
// gossip for members not registered yet.
func (n *Node) clientAddrOf(id string) string {
	var addr string
	n.meta.view(func(f *meta.FSM) {
		if nd, ok := f.Node(id); ok {
			addr = nd.ClientAddr
		}
	})
	if addr != "" {
		return addr
	}
	for _, m := range n.members.members() {
		if m.ID == id {
			return m.Client
		}
	}
	return ""
}

// receiptOf is the FSM's form of a receipt (its partition is the caller's
// to check).
func receiptOf(r wire.Receipt) fsm.Receipt { return fsm.Receipt{Seq: r.Seq, Attempt: r.Attempt} }

// extendItemOf is the FSM's form of an extend item.
func extendItemOf(it wire.ExtendItem) fsm.ExtendItem {
	return fsm.ExtendItem{Receipt: receiptOf(it.Receipt), Visibility: it.Visibility}
}

// nackItemOf is the FSM's form of a nack item.
func nackItemOf(it wire.NackItem) fsm.NackItem {
	return fsm.NackItem{Receipt: receiptOf(it.Receipt), ExplicitDelay: it.ExplicitDelay, Delay: it.Delay, Reason: it.Reason, Release: it.Release}
}

// rejectItemOf is the FSM's form of a reject item.
func rejectItemOf(it wire.RejectItem) fsm.RejectItem {
	return fsm.RejectItem{Receipt: receiptOf(it.Receipt), Reason: it.Reason}
}

// pick converts the items at the given indexes (all items when indexes is
// nil), keeping their order.
func pick[T, U any](items []T, indexes []int, conv func(T) U) []U {
	if indexes == nil {
		out := make([]U, len(items))
		for i, it := range items {
			out[i] = conv(it)
		}
		return out
	}
	out := make([]U, len(indexes))
	for k, i := range indexes {
		out[k] = conv(items[i])
	}
	return out
}

// deadFilterOf converts a dead-letter filter from the wire to the state
// machine, field for field; reasons keep their numbers (the two enums are
// pinned by convert_dead_test.go). The state machine validates it.
func deadFilterOf(f wire.DeadFilter) fsm.DeadFilter {
	return fsm.DeadFilter{Seqs: f.Seqs, Reason: fsm.DeadReason(f.Reason), Group: f.Group,
		FromAt: f.FromAt, ToAt: f.ToAt, AfterSeq: f.AfterSeq, Limit: f.Limit, Text: f.Text}
}

// deadLetterOf converts a dead letter of partition partitionIndex from the
// state machine to the wire, field for field; reasons and event kinds
// keep their numbers (pinned by convert_dead_test.go).
func deadLetterOf(partitionIndex int, d fsm.DeadLetter) wire.DeadLetter {
	out := wire.DeadLetter{
		Partition: partitionIndex, Seq: d.Seq, ID: d.ID, Group: d.Group, Headers: d.Headers, Body: d.Body,
		Bytes: d.Bytes, Attempts: d.Attempts, FirstEnqueuedAt: d.FirstEnqueuedAt, EnqueuedAt: d.EnqueuedAt,
		FirstDeliveredAt: d.FirstDeliveredAt, LastDeliveredAt: d.LastDeliveredAt, DeadAt: d.DeadAt,
		Reason: wire.DeadReason(d.Reason), ReasonText: d.ReasonText, LastConsumer: d.LastConsumer, Priority: wire.Priority(d.Priority),
	}
	for _, e := range d.History {
		out.History = append(out.History, wire.Event{Kind: wire.EventKind(e.Kind), At: e.At, Attempt: e.Attempt, Consumer: e.Consumer, Reason: e.Reason})
	}
	return out
}

// messageInfoOf converts a found message of partition partitionIndex to
// the wire.
func messageInfoOf(partitionIndex int, m fsm.MessageInfo) wire.MessageInfo {
	out := wire.MessageInfo{Partition: partitionIndex, Seq: m.Seq, ID: m.ID, Group: m.Group, State: string(m.State),
		Attempts: m.Attempts, EnqueuedAt: m.EnqueuedAt, VisibleAt: m.VisibleAt, Consumer: m.Consumer, Priority: wire.Priority(m.Priority)}
	if m.Dead != nil {
		d := deadLetterOf(partitionIndex, *m.Dead)
		out.Dead = &d
	}
	for _, e := range m.History {
		out.History = append(out.History, wire.Event{Kind: wire.EventKind(e.Kind), At: e.At, Attempt: e.Attempt, Consumer: e.Consumer, Reason: e.Reason})
	}
	return out
}

// peekFilterOf turns a peek request into the FSM's filter; the FSM checks
// it (an unknown state name is refused here, by fsm.ParseStates).
func peekFilterOf(r *wire.PeekRequest) (fsm.PeekFilter, error) {
	states, err := fsm.ParseStates(r.States)
	if err != nil {
		return fsm.PeekFilter{}, err
	}
	budget := r.MaxBytes
	if budget == 0 {
		budget = wire.PeekBytesMax
	}
	return fsm.PeekFilter{Max: r.Max, MaxBytes: budget, AfterSeq: r.AfterSeq, States: states, Group: r.Group,
		HeaderKey: r.HeaderKey, HeaderValue: r.HeaderValue, MinAge: r.OlderThan, NoBodies: r.NoBodies}, nil
}

// peekedOf renders a peeked message of partition partitionIndex.
func peekedOf(partitionIndex int, m fsm.Peeked) wire.PeekedMessage {
	return wire.PeekedMessage{Partition: partitionIndex, Seq: m.Seq, ID: m.ID, Group: m.Group, Headers: m.Headers, Body: m.Body,
		EnqueuedAt: m.EnqueuedAt, Attempts: m.Attempts, Blocked: m.Blocked, Priority: wire.Priority(m.Priority),
		State: string(m.State), VisibleAt: m.VisibleAt, Consumer: m.Consumer}
}

// statsOf renders a partition's state-machine stats and its replica status
// (leader, applied index) for the wire.
func statsOf(index int, st fsm.Stats, s partition.Status) wire.PartitionStats {
	c := st.Counters
	return wire.PartitionStats{
		Partition: index, Leader: s.LeaderID, AppliedIndex: s.AppliedIndex,
		Ready: st.Ready, Eligible: st.Eligible, Delayed: st.Delayed, InFlight: st.InFlight, Dead: st.Dead,
		Bytes: st.Bytes, DeadBytes: st.DeadBytes, OldestEligibleAge: st.OldestEligibleAge, Groups: st.Groups, LastSeq: st.LastSeq,
		Counters: wire.Counters{Sent: c.Sent, Duplicates: c.Duplicates, Leased: c.Leased, Acked: c.Acked, Nacked: c.Nacked,
			Rejected: c.Rejected, Expired: c.Expired, DeadLettered: c.DeadLettered, Redriven: c.Redriven,
			DeadDeleted: c.DeadDeleted, Purged: c.Purged, RetentionExpired: c.RetentionExpired,
			DeadEvicted: c.DeadEvicted, DeadExpired: c.DeadExpired, DedupEvicted: c.DedupEvicted},
		Paused: st.Pause.Paused, PausedBy: st.Pause.By, PausedAt: st.Pause.At,
	}
}

// queueConfigOf renders a catalog config for the wire, setting by setting
// from fsm's settings table (the names agree: see init).
func queueConfigOf(c meta.QueueConfig) wire.QueueConfig {
	w := wire.QueueConfig{Partitions: c.Partitions, Replicas: c.Replicas}
	for _, s := range fsm.Settings() {
		w.Set(wireField(s.Name), s.Get(c.Queue))
	}
	return w
}

// catalogConfigOf is the inverse of queueConfigOf.
func catalogConfigOf(w wire.QueueConfig) meta.QueueConfig {
	c := meta.QueueConfig{Partitions: w.Partitions, Replicas: w.Replicas}
	for _, s := range fsm.Settings() {
		s.Set(&c.Queue, w.Get(wireField(s.Name)))
	}
	return c
}

// wireField is the wire bit of the setting named name.
func wireField(name string) wire.ConfigFields {
	f, _ := wire.ConfigFieldNamed(name)
	return f
}

// init asserts that the wire's QueueConfig and fsm's settings table name
// the same settings: the wire's fields are partitions, replicas and then
// fsm's settings in table order. A setting added to one and not the other
// would be silently dropped by the conversions above, so it stops the
// node from starting (and every test of this package) instead.
func init() {
	wf, fs := wire.ConfigFieldList(), fsm.Settings()
	ok := len(wf) == len(fs)+2 && wf[0].Field == wire.FieldPartitions && wf[1].Field == wire.FieldReplicas
	for i := 0; ok && i < len(fs); i++ {
		ok = wf[i+2].Name == fs[i].Name && wf[i+2].Duration == (fs[i].Kind == fsm.KindDuration)
	}
	if !ok {
		var wn, fn []string
		for _, f := range wf {
			wn = append(wn, f.Name)
		}
		for _, s := range fs {
			fn = append(fn, s.Name)
		}
		panic(fmt.Sprintf("node: wire.QueueConfig fields %v do not match partitions, replicas and fsm's settings table %v", wn, fn))
	}
}

// settingInfos describes every queue setting for the wire: the catalog's
// shape settings, then fsm's table.
func settingInfos() []wire.SettingInfo {
	out := []wire.SettingInfo{
		{Name: "partitions", Kind: fsm.KindCount.String(), Default: 1, Min: 1, Max: meta.PartitionsMax, Fixed: true,
			Help: "number of partitions"},
		{Name: "replicas", Kind: fsm.KindCount.String(), Min: 0, Max: meta.ReplicasMax, Fixed: true,
			Zero: "3, or the number of nodes when fewer", Help: "replicas of each partition"},
	}
	for _, s := range fsm.Settings() {
		out = append(out, wire.SettingInfo{Name: s.Name, Kind: s.Kind.String(), Default: s.Default, Min: s.Min, Max: s.Max,
			Zero: s.Zero, Help: s.Help})
	}
	return out
}

// itoa formats i in decimal (metric labels, partition indexes).
func itoa(i int) string { return strconv.Itoa(i) }
