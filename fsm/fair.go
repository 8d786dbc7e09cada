package fsm

import (
	"fmt"
	"sort"

	"github.com/google/btree"
)

// Fair delivery across groups (QueueConfig.FairGroups). Within a priority
// level the eligible messages fall into lanes: each group with an eligible
// head is a lane, and the eligible ungrouped messages form one more. A
// receive takes the next message from the lane that got a delivery the
// longest ago, and a lane that just got one goes to the back; within the
// ungrouped lane the oldest goes first. A group's messages stay one at a
// time in send order, so a group lane offers only its head.
//
// The order is a replicated counter: every delivery taken from a lane
// stamps the lane with the next value of f.laneClock (group.served for a
// group, f.plainTick for the ungrouped lane), and a new group is stamped
// when it is created, so it queues behind the lanes already waiting. Of
// the lanes with an eligible message in a level, none is passed over more
// than once: a lane waits at most (number of lanes - 1) deliveries of its
// level. The stamps are in snapshots, and in the digest while FairGroups
// is on; they move only while it is on.
//
// Index: while FairGroups is on, the eligible group heads are in f.lanes,
// ordered by (priority, highest first; stamp; seq), besides their level's
// index, and never found by the fresh cursor, which then holds ungrouped
// messages only. f.laneCount counts them per priority. That is one entry
// per group with an eligible head.

// fair says whether the partition delivers fairly across groups.
func (f *FSM) fair() bool { return f.cfg.FairGroups != 0 }

// laneLess orders group heads by priority (highest first), then by their
// group's stamp, then by seq.
func laneLess(a, b *message) bool {
	if pa, pb := a.priority(), b.priority(); pa != pb {
		return pa > pb
	}
	if a.group.served != b.group.served {
		return a.group.served < b.group.served
	}
	return a.seq < b.seq
}

// addLane indexes an eligible group head m when delivery is fair.
func (f *FSM) addLane(m *message) {
	if !f.fair() || m.group == nil {
		return
	}
	if f.lanes == nil {
		f.lanes = btree.NewG(btreeDegree, laneLess)
	}
	f.lanes.ReplaceOrInsert(m)
	f.laneCount[m.priority()]++
}

// dropLane removes m from the lanes when delivery is fair.
func (f *FSM) dropLane(m *message) {
	if !f.fair() || m.group == nil {
		return
	}
	f.mustDelete(f.lanes.Delete(m))
	f.laneCount[m.priority()]--
}

// stampNew stamps a group just created, when delivery is fair.
func (f *FSM) stampNew(g *group) {
	if f.fair() {
		f.laneClock++
		g.served = f.laneClock
	}
}

// served stamps the lane of m, just taken, when delivery is fair.
func (f *FSM) served(m *message) {
	if !f.fair() {
		return
	}
	f.laneClock++
	if m.group != nil {
		m.group.served = f.laneClock
	} else {
		f.plainTick = f.laneClock
	}
}

// rebuildLanes indexes every eligible group head in the lanes when delivery
// is fair, moving heads found by the fresh cursor into their level's index;
// it empties the lanes otherwise. It runs when FairGroups changes and after
// a restore: O(groups).
func (f *FSM) rebuildLanes() {
	f.lanes, f.laneCount = nil, [PriorityMax + 1]int{}
	if !f.fair() {
		return
	}
	for _, g := range f.groups {
		h := g.first()
		switch h.eligible {
		case eligibleFIFO:
			h.eligible = notEligible // stays counted as eligible
			f.indexEligible(h)
		case eligibleTree:
			f.addLane(h)
		}
	}
}

// fairPick returns the message a fair receive takes from level p, whose
// oldest eligible message is oldest (nil when the level is empty).
func (f *FSM) fairPick(p uint8, oldest *message) *message {
	if !f.fair() || oldest == nil {
		return oldest
	}
	var head *message
	if f.laneCount[p] > 0 {
		f.lanePivot.setPriority(p)
		f.lanes.AscendGreaterOrEqual(&f.lanePivot, func(m *message) bool {
			head = m
			return false
		})
	}
	if head == nil {
		return oldest // only ungrouped messages at p
	}
	if f.plainTick > head.group.served || !f.plainAt(p) {
		return head
	}
	if oldest.group == nil {
		return oldest
	}
	return f.oldestPlain(p)
}

// plainAt says whether an ungrouped message is eligible at priority p.
func (f *FSM) plainAt(p uint8) bool {
	if p == 0 {
		return f.freshFront() != nil || f.returned.Len() > f.laneCount[0]
	}
	t := f.levels[p-1]
	return t != nil && t.Len() > f.laneCount[p]
}

// oldestPlain returns the oldest eligible ungrouped message of priority p,
// which plainAt says exists. It passes over the group heads older than it,
// at most one per lane, and runs only on the ungrouped lane's turn.
func (f *FSM) oldestPlain(p uint8) *message {
	var out *message
	if p == 0 {
		out = f.freshFront() // ungrouped only, while delivery is fair
	}
	f.levelTree(p).Ascend(func(m *message) bool {
		if out != nil && m.seq > out.seq {
			return false
		}
		if m.group == nil {
			out = m
			return false
		}
		return true
	})
	return out
}

// snapLane is a group's stamp in a snapshot.
type snapLane struct {
	Group  string `msgpack:"g"`
	Served uint64 `msgpack:"s"`
}

// freezeLanes lists the stamped groups by name.
func (f *FSM) freezeLanes() []snapLane {
	var out []snapLane
	for name, g := range f.groups {
		if g.served != 0 {
			out = append(out, snapLane{Group: name, Served: g.served})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Group < out[j].Group })
	return out
}

// restoreLanes sets the stamps a snapshot recorded, after its messages.
func (f *FSM) restoreLanes(h *snapHeader) error {
	for _, g := range f.groups {
		g.served = 0 // a group a restore created is stamped by the header only
	}
	if h.PlainTick > h.LaneClock {
		return fmt.Errorf("%w: ungrouped lane stamped %d after the lane clock %d", ErrSnapshotFormat, h.PlainTick, h.LaneClock)
	}
	f.laneClock, f.plainTick = h.LaneClock, h.PlainTick
	for _, l := range h.Lanes {
		g := f.groups[l.Group]
		if g == nil || l.Served > h.LaneClock {
			return fmt.Errorf("%w: lane stamp %d of group %q (lane clock %d, group known: %v)",
				ErrSnapshotFormat, l.Served, l.Group, h.LaneClock, g != nil)
		}
		g.served = l.Served
	}
	f.rebuildLanes()
	return nil
}

// digestLanes adds the stamps to a digest while delivery is fair.
func (f *FSM) digestLanes(d *digester) {
	if !f.fair() {
		return
	}
	d.Ints(-2, int64(f.laneClock), int64(f.plainTick))
	for _, l := range f.freezeLanes() {
		d.Str(l.Group)
		d.Ints(int64(l.Served))
	}
}
