package fsm

import (
	"fmt"
	"hash/crc32"
	"time"

	"github.com/google/btree"
)

// btreeDegree is the fan-out of the FSM's ordered indexes.
const btreeDegree = 32

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// FSM is the state machine of one queue partition. Create it with New; feed
// it with Apply (log bytes) or ApplyCommand; read it with the view methods.
type FSM struct {
	cfg     QueueConfig
	store   BodyStore
	entries EntryBodyStore // store, when it can keep payloads in log entries
	clock   int64          // the largest command time seen, Unix nanoseconds
	lastSeq uint64         // the last sequence number handed out
	pause   PauseState     // receives lease nothing while paused
	rateTAT int64          // the delivery rate bound's schedule (rate.go)
	// maxStep bounds how far one command (other than CmdClockResync) may
	// move clock forward, in nanoseconds; 0: unbounded. Not replicated:
	// every replica must be given the same value.
	maxStep int64

	table      seqTable                             // every message not acked, deleted or dead
	dead       *btree.BTreeG[*message]              // dead letters by seq
	deadOrder  *btree.BTreeG[*message]              // dead letters by (deadAt, seq): eviction and retention order
	freshFrom  uint64                               // no seq below this is eligibleFIFO
	returned   *btree.BTreeG[*message]              // other eligible messages of priority 0 by seq
	levels     [PriorityMax]*btree.BTreeG[*message] // eligible messages of priority p in levels[p-1], by seq; nil until used
	high       int                                  // eligible messages of a priority above 0
	guard      uint8                                // the starvation guard's count (priority.go)
	levelNodes *btree.FreeListG[*message]           // the free list the level trees share; not state
	lanes      *btree.BTreeG[*message]              // eligible group heads while delivery is fair (fair.go)
	laneCount  [PriorityMax + 1]int                 // lanes' entries by priority
	laneClock  uint64                               // the last lane stamp handed out
	plainTick  uint64                               // the ungrouped lane's stamp
	lanePivot  message                              // a search key into lanes; not state
	timers     *btree.BTreeG[*message]              // delayed and in-flight messages by (visibleAt, seq)
	groups     map[string]*group                    // groups with unfinished messages
	dedup      dedupTable                           // ids inside the dedup window -> seq, in acceptance order
	marks      fifo[dedupMark]                      // acceptance times of dedup's entries
	lastMark   int64                                // time of the newest mark
	counters   Counters
	gauges     gauges
	keys       bodyKeys // redriven messages whose body is stored under an older seq
	// schedules are the partition's recurring schedules by name, also
	// ordered by (next tick, name) in scheduleTimes; scheduleBytes sums
	// their templates' sizes.
	schedules     map[string]*schedule
	scheduleTimes *btree.BTreeG[*schedule]
	scheduleBytes int
	// skipBodies leaves deliveries without headers and bodies: a replica
	// that is not the leader answers no client, so reading them is waste.
	skipBodies bool
}

// gauges are counts kept up to date on every transition.
type gauges struct {
	ready, eligible, delayed, inFlight, dead int64
	bytes, deadBytes                         int64
}

// dedupMark says that the dedup entries from absolute position `index` on
// were accepted at time at (until the next mark).
type dedupMark struct {
	index uint64
	at    int64
}

// New returns an empty FSM with the given config, keeping bodies in store.
// The store must be empty: the FSM's state is rebuilt from the log or a
// snapshot, never from what a store holds.
func New(cfg QueueConfig, store BodyStore) (*FSM, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if store == nil {
		return nil, fmt.Errorf("%w: nil body store", ErrInvalidArgument)
	}
	f := &FSM{cfg: cfg, store: store}
	f.entries, _ = store.(EntryBodyStore)
	f.reset()
	return f, nil
}

func (f *FSM) reset() {
	bySeq := func(a, b *message) bool { return a.seq < b.seq }
	byTime := func(a, b *message) bool {
		if a.visibleAt != b.visibleAt {
			return a.visibleAt < b.visibleAt
		}
		return a.seq < b.seq
	}
	f.clock, f.lastSeq = 0, 0
	f.pause, f.rateTAT = PauseState{}, 0
	f.table = seqTable{}
	f.dead = btree.NewG(btreeDegree, bySeq)
	f.deadOrder = btree.NewG(btreeDegree, func(a, b *message) bool {
		if a.info.deadAt != b.info.deadAt {
			return a.info.deadAt < b.info.deadAt
		}
		return a.seq < b.seq
	})
	f.freshFrom = 0
	f.returned = btree.NewG(btreeDegree, bySeq)
	f.levels, f.high, f.guard = [PriorityMax]*btree.BTreeG[*message]{}, 0, 0
	f.lanes, f.laneCount, f.laneClock, f.plainTick = nil, [PriorityMax + 1]int{}, 0, 0
	f.lanePivot = message{group: &group{}}
	f.timers = btree.NewG(btreeDegree, byTime)
	f.groups = make(map[string]*group)
	f.dedup = newDedupTable()
	f.marks.reset()
	f.lastMark = 0
	f.counters = Counters{}
	f.gauges = gauges{}
	f.keys.reset()
	f.schedules, f.scheduleBytes = make(map[string]*schedule), 0
	f.scheduleTimes = btree.NewG(8, func(a, b *schedule) bool {
		if a.info.Next != b.info.Next {
			return a.info.Next < b.info.Next
		}
		return a.info.Name < b.info.Name
	})
}

// Apply decodes one log entry and applies it. Accepted messages' payloads
// are copied into the body store (Append). An entry that does not decode
// means the log is corrupted; Apply panics rather than skip it.
func (f *FSM) Apply(data []byte) Result { return f.ApplyEntry(0, data) }

// ApplyEntry is Apply for the log entry at index (> 0). When the body store
// is an EntryBodyStore, each message a send accepts is kept where the entry
// holds its payload (EntryBodyStore.Ref) instead of being copied; refused
// and duplicate messages refer to nothing. Entries written before payloads
// had their own field, and index 0, take Apply's copying path. The result
// is the same either way.
func (f *FSM) ApplyEntry(index uint64, data []byte) Result {
	c, err := decodeCommand(data)
	if err != nil {
		panic(fmt.Sprintf("fsm: undecodable log entry (%d bytes): %v", len(data), err))
	}
	return f.apply(c, index)
}

// ApplyCommand applies a decoded command. Time first moves to c.At (never
// backwards), which fires due timers; then the command itself runs.
func (f *FSM) ApplyCommand(c Command) Result { return f.apply(c, 0) }

// apply is ApplyCommand for the command of log entry index (0: unknown).
func (f *FSM) apply(c Command, index uint64) Result {
	r := Result{Type: c.Type}
	if err := f.moveClock(c); err != nil {
		r.Err = err
		return r
	}
	expired := f.advance()
	if _, err := c.payload(); err != nil {
		r.Err = err
		return r
	}
	switch c.Type {
	case CmdSend:
		r.Sent, r.Err = f.applySend(c.Send, index)
	case CmdReceive:
		r.Delivered, r.Err = f.applyReceive(c.Receive)
	case CmdAck:
		r.Settled, r.Err = settleBatch(len(c.Ack.Receipts), func(i int) error { return f.ackOne(c.Ack.Receipts[i]) })
	case CmdReceiveAck:
		r.Settled, r.Delivered, r.Err = f.applyReceiveAck(c.ReceiveAck)
	case CmdExtend:
		r.Settled, r.Err = settleBatch(len(c.Extend.Items), func(i int) error { return f.extendOne(c.Extend.Items[i]) })
	case CmdNack:
		r.Settled, r.Err = settleBatch(len(c.Nack.Items), func(i int) error { return f.nackOne(c.Nack.Items[i]) })
	case CmdReject:
		r.Settled, r.Err = settleBatch(len(c.Reject.Items), func(i int) error { return f.rejectOne(c.Reject.Items[i]) })
	case CmdTick:
		r.Count = expired
	case CmdRedrive:
		r.Count, r.Err = f.applyRedrive(*c.Redrive)
	case CmdDeleteDead:
		r.Count, r.Err = f.applyDeleteDead(*c.DeleteDead)
	case CmdPurge:
		r.Count = f.applyPurge(false)
	case CmdPurgeAll:
		r.Count = f.applyPurge(true)
	case CmdDeleteMessages:
		r.Count, r.Err = f.applyDeleteMessages(c.DeleteMany)
	case CmdPause:
		r.Err = f.applyPause(c.Pause)
	case CmdDeleteMessage:
		r.Err = f.applyDeleteMessage(c.Delete)
		if r.Err == nil {
			r.Count = 1
		}
	case CmdSetSchedule:
		r.Err = f.applySetSchedule(c.Schedule)
	case CmdDeleteSchedule:
		r.Count, r.Err = f.applyDeleteSchedule(c.Unschedule)
	case CmdFireSchedule:
		r.Sent, r.Err = f.applyFireSchedule(c.Fire)
		r.Count = len(r.Sent)
	case CmdSetConfig:
		r.Err = c.SetConfig.Validate()
		if r.Err == nil {
			wasFair := f.fair()
			f.cfg = *c.SetConfig
			if f.fair() != wasFair {
				f.rebuildLanes()
			}
			f.trimDead() // a lowered cap holds from now on
		}
	}
	return r
}

// moveClock moves the clock to c.At unless that is backwards; a command
// stamped more than maxStep ahead is refused (and counted), except a
// CmdClockResync and the first command of all.
func (f *FSM) moveClock(c Command) error {
	if c.At <= f.clock {
		return nil
	}
	step := c.At - f.clock
	switch {
	case f.clock == 0 || f.maxStep == 0 || step <= f.maxStep:
	case c.Type == CmdClockResync:
		f.counters.ClockResyncs++
	default:
		f.counters.ClockRefused++
		return fmt.Errorf("%w: %s stamped %v ahead of the partition clock (max step %v)",
			ErrClockStep, c.Type, time.Duration(step), time.Duration(f.maxStep))
	}
	f.clock = c.At
	return nil
}

// SetMaxClockStep bounds how far one command may move the clock forward:
// a command stamped more than d ahead of the clock fails with ErrClockStep
// and changes nothing, so a leader whose clock jumped ahead cannot expire
// every lease, fire every delay and empty the dedup window at once.
// CmdClockResync is exempt: the proposer sends it only once it has checked
// its clock against the other nodes'. 0 (the default) means no bound.
// The bound is not replicated state: every replica of a partition must be
// given the same value before it applies anything.
func (f *FSM) SetMaxClockStep(d time.Duration) { f.maxStep = max(int64(d), 0) }

// MaxClockStep returns the bound set with SetMaxClockStep.
func (f *FSM) MaxClockStep() time.Duration { return time.Duration(f.maxStep) }

// settleBatch runs one per-item operation over a batch after checking its
// size.
func settleBatch(n int, one func(i int) error) ([]error, error) {
	if err := CheckBatch(n); err != nil {
		return nil, err
	}
	out := make([]error, n)
	for i := range n {
		out[i] = one(i)
	}
	return out, nil
}

// SkipBodies makes receives return deliveries without headers and bodies
// (skip) or with them (the default). It changes no state and no other part
// of a result; a replica that answers no client sets it to save the reads.
func (f *FSM) SkipBodies(skip bool) { f.skipBodies = skip }

// Config returns the queue config in force.
func (f *FSM) Config() QueueConfig { return f.cfg }

// Clock returns the FSM's clock: the largest command time applied.
func (f *FSM) Clock() int64 { return f.clock }
