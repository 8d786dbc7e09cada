package meta

import (
	"fmt"
)

// FSM is the meta group's state machine: the catalog of nodes and queues.
// Create it with New; feed it with Apply (log bytes) or ApplyCommand; read
// it with the view methods.
type FSM struct {
	clock       int64  // the largest command time seen, Unix nanoseconds
	lastQueueID uint64 // the last queue id handed out
	nodes       map[string]*Node
	queues      map[string]*Queue
	loads       map[string]*load // per registered node, derived from queues
	removed     map[string]int64 // removed node ids -> when removed
}

// Result is what applying one command returns. Err is a whole-command
// failure that changed nothing.
type Result struct {
	Type CommandType
	Err  error
	// Node is a copy of the node as registered, for CmdRegisterNode and
	// CmdSetDraining.
	Node Node
	// Queue is a copy of the queue as created or updated, or as it was just
	// before being deleted, for the queue commands that succeed.
	Queue Queue
	// Moved is how many replicas CmdRemoveNode placed on other nodes.
	Moved int
}

// New returns an empty catalog.
func New() *FSM {
	f := &FSM{}
	f.reset()
	return f
}

func (f *FSM) reset() {
	f.clock, f.lastQueueID = 0, 0
	f.nodes = make(map[string]*Node)
	f.queues = make(map[string]*Queue)
	f.loads = make(map[string]*load)
	f.removed = make(map[string]int64)
}

// Apply decodes one log entry and applies it. An entry that does not decode
// means the log is corrupted; Apply panics rather than skip it.
func (f *FSM) Apply(data []byte) Result {
	c, err := DecodeCommand(data)
	if err != nil {
		panic(fmt.Sprintf("meta: undecodable log entry (%d bytes): %v", len(data), err))
	}
	return f.ApplyCommand(c)
}

// ApplyCommand applies a decoded command. The clock first moves to c.At
// (never backwards); then the command runs, stamping what it changes with
// the clock.
func (f *FSM) ApplyCommand(c Command) Result {
	if c.At > f.clock {
		f.clock = c.At
	}
	r := Result{Type: c.Type}
	if _, err := c.payload(); err != nil {
		r.Err = err
		return r
	}
	switch c.Type {
	case CmdRegisterNode:
		r.Node, r.Err = f.registerNode(c.RegisterNode.Node)
	case CmdCreateQueue:
		r.Queue, r.Err = f.createQueue(c.CreateQueue)
	case CmdUpdateQueue:
		r.Queue, r.Err = f.updateQueue(c.UpdateQueue)
	case CmdDeleteQueue:
		r.Queue, r.Err = f.deleteQueue(c.DeleteQueue.Name)
	case CmdRemoveNode:
		r.Moved, r.Err = f.removeNode(c.RemoveNode.ID)
	case CmdReplicaCaughtUp:
		r.Err = f.replicaCaughtUp(c.ReplicaCaughtUp)
	case CmdReplicaLeft:
		r.Err = f.replicaLeft(c.ReplicaLeft)
	case CmdMoveReplica:
		r.Err = f.moveReplica(c.MoveReplica)
	case CmdSetDraining:
		r.Node, r.Err = f.setDraining(c.SetDraining)
	case CmdPreferLeader:
		r.Err = f.preferLeader(c.PreferLeader)
	}
	return r
}

// Clock returns the state machine's clock: the largest command time applied.
func (f *FSM) Clock() int64 { return f.clock }

func (f *FSM) registerNode(n Node) (Node, error) {
	if err := n.Validate(); err != nil {
		return Node{}, err
	}
	if f.Removed(n.ID) {
		return Node{}, fmt.Errorf("%w: %q", ErrNodeRemoved, n.ID)
	}
	if old, ok := f.nodes[n.ID]; ok {
		rejoin := old.Incarnation != 0 && n.Incarnation != 0 && n.Incarnation != old.Incarnation
		if n.Incarnation == 0 {
			n.Incarnation = old.Incarnation
		}
		n.RegisteredAt, n.Draining = old.RegisteredAt, old.Draining
		*old = n
		if rejoin {
			f.markRejoining(n.ID)
		}
		return n, nil
	}
	n.Draining = false
	if len(f.nodes) >= NodesMax {
		return Node{}, fmt.Errorf("%w: %d nodes registered, the most allowed", ErrInvalidArgument, NodesMax)
	}
	n.RegisteredAt = f.clock
	f.nodes[n.ID] = &n
	f.loads[n.ID] = &load{id: n.ID}
	f.fillUnderReplicated(n.ID)
	return n, nil
}

// createQueue validates the request, resolves the default replica count,
// assigns the next id and places the partitions (see place).
func (f *FSM) createQueue(c *CreateQueueCmd) (Queue, error) {
	if err := ValidateName(c.Name); err != nil {
		return Queue{}, err
	}
	cfg := c.Config
	if err := cfg.Validate(); err != nil {
		return Queue{}, err
	}
	if _, ok := f.queues[c.Name]; ok {
		return Queue{}, fmt.Errorf("%w: %q", ErrQueueExists, c.Name)
	}
	if err := f.checkLimits(c); err != nil {
		return Queue{}, err
	}
	placeable := f.placeable()
	if cfg.Replicas == 0 {
		cfg.Replicas = min(DefaultReplicas, placeable)
	}
	if cfg.Replicas == 0 || cfg.Replicas > placeable {
		return Queue{}, fmt.Errorf("%w: queue %q wants %d replicas, %d nodes are registered and not draining",
			ErrNotEnoughNodes, c.Name, max(cfg.Replicas, 1), placeable)
	}
	f.lastQueueID++
	q := &Queue{
		Name: c.Name, ID: f.lastQueueID, Config: cfg,
		Partitions: f.place(cfg.Partitions, cfg.Replicas),
		CreatedAt:  f.clock, UpdatedAt: f.clock, Version: 1,
	}
	f.queues[q.Name] = q
	return q.clone(), nil
}

// checkLimits refuses a create that would take the catalog past QueuesMax
// or the create's own MaxQueues and MaxPartitions.
func (f *FSM) checkLimits(c *CreateQueueCmd) error {
	maxQueues := QueuesMax
	if c.MaxQueues > 0 {
		maxQueues = min(maxQueues, c.MaxQueues)
	}
	if len(f.queues) >= maxQueues {
		return fmt.Errorf("%w: %d queues exist, the most allowed", ErrLimitExceeded, len(f.queues))
	}
	if c.MaxPartitions <= 0 {
		return nil
	}
	total := 0
	for _, q := range f.queues {
		total += q.Config.Partitions
	}
	if total+c.Config.Partitions > c.MaxPartitions {
		return fmt.Errorf("%w: %d partitions exist, %d more would pass the most allowed, %d",
			ErrLimitExceeded, total, c.Config.Partitions, c.MaxPartitions)
	}
	return nil
}

// updateQueue replaces the partition configuration of a queue, keeping its
// shape and placement, and bumps its version.
func (f *FSM) updateQueue(c *UpdateQueueCmd) (Queue, error) {
	q, ok := f.queues[c.Name]
	if !ok {
		return Queue{}, fmt.Errorf("%w: %q", ErrQueueNotFound, c.Name)
	}
	cfg := c.Config
	if cfg.Partitions != 0 && cfg.Partitions != q.Config.Partitions {
		return Queue{}, badConfig("Partitions", cfg.Partitions,
			fmt.Sprintf("fixed at creation (queue %q has %d)", q.Name, q.Config.Partitions))
	}
	if cfg.Replicas != 0 && cfg.Replicas != q.Config.Replicas {
		return Queue{}, badConfig("Replicas", cfg.Replicas,
			fmt.Sprintf("fixed at creation (queue %q has %d)", q.Name, q.Config.Replicas))
	}
	if err := cfg.Queue.Validate(); err != nil {
		return Queue{}, err
	}
	q.Config.Queue = cfg.Queue
	q.UpdatedAt = f.clock
	q.Version++
	return q.clone(), nil
}

func (f *FSM) deleteQueue(name string) (Queue, error) {
	q, ok := f.queues[name]
	if !ok {
		return Queue{}, fmt.Errorf("%w: %q", ErrQueueNotFound, name)
	}
	f.unplace(q)
	delete(f.queues, name)
	return q.clone(), nil
}
