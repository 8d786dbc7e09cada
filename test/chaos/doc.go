// Package chaos is Ferry's chaos suite: real ferryd processes under
// kill -9, SIGSTOP pauses, network partitions and full restarts, with a
// workload whose every call is recorded and a checker in the manner of
// Jepsen.
//
// # What a run does
//
// The harness builds ferryd once and starts N processes (3 by default, 5
// for the long suite), each on its own loopback address (127.0.1.11,
// .12, ...; apart from the 127.0.0.x addresses other packages' tests use,
// since iptables rules are machine-wide) with its own ports, data
// directory and log file. Partitions
// snapshot often (see DefaultServerArgs) so that restarted and wiped
// replicas are rebuilt from snapshots.
//
// Producers send to three queues (3, 2 and 1 partitions): grouped messages
// (each group has exactly one producer, which sends one message at a time,
// so the group's order is the producer's; 24 order groups per producer),
// ungrouped ones, some delayed; one message in 150 is of the largest size
// a queue takes (1 MiB), and now and then a producer sends a batch of
// ungrouped jobs (20-200 messages, or the 1000 one request carries). An
// operator redrives up to 25 dead letters of the jobs queue every 3 s
// while the producers run.
// Every attempt is recorded as confirmed, definitely failed, or unknown
// (client.ErrUnconfirmed, or the context ending mid-call); an unconfirmed
// message is retried with the same id. Consumers ack most deliveries, nack
// some (with a delay or the queue's backoff), reject a few, abandon some
// leases (a simulated consumer crash) and sometimes work past the 1.5 s
// visibility timeout; one message in 80 is poison and runs out of its 5
// receives. Every delivery and every ack, nack and reject outcome is
// recorded with its times.
//
// Faults follow a schedule drawn from a seed (printed; FERRY_CHAOS_SEED
// replays it): kill -9 of a random node, of a partition's leader and of
// the meta leader, each restarted later from its data; SIGSTOP of a
// partition leader and of a follower for 3-6 s (past the 1 s election
// timeout); iptables partitions that isolate one node, split a minority
// from the majority, or leave two halves joined only by a bridge node;
// kill -9 of every node followed by a restart of all; a node killed,
// its data directory deleted, and restarted empty; a node's clock an hour
// ahead, an hour behind, or a partition leader's clock jumping by seconds
// to hours either way (ferryd is built with the chaosclock and chaosdisk
// tags: the harness shifts its clock over POST /v1/debug/clock and arms
// fsync and write failures over POST /v1/debug/disk); a leader-follower
// link made slow, lossy, delayed, jittery and reordering, both ways or one
// way; a node's data directory (each node's is a tmpfs) filled to a
// megabyte; a node's next three raft log fsyncs failing with EIO; and a
// node's next three raft log writes failing with EIO, whole or after
// writing half; a node drained and undrained; a rolling restart (each node
// stopped with SIGTERM once safe-to-stop says so); and kill -9 of the meta
// leader or of a moving partition's leader while a drain's replica move is
// in flight, with a sampler that fails the run if any partition shows fewer
// caught-up voters than a majority of its target set; a node lost for good
// (kill -9, data deleted), whose replicas the cluster rebuilds on the live
// nodes after the dead-node timeout (DeadNodeTimeout; on three nodes with
// three replicas it reports them under-replicated with the reason), then a
// new node joining in its place, the cluster whole and balanced again, and
// the lost node removed; and two new nodes joining at once until replica
// and leader counts per node are within one, then drained and removed.
// The nodes that join come from spare slots laid out with the cluster
// (SpareSlots); the same sampler runs through both. Each fault's line
// gives the longest send stall it caused and, for moves, the time taken
// and the snapshot bytes streamed. Faults
// come one at a time; after each the harness waits until every partition
// has a leader and every replica has caught up and votes (a rebuilt
// replica promoted, none abstaining), so that no fault strikes a group
// still short of a voter from the last one. While a clock fault runs a
// node ahead, the checker takes the servers' stamps (lease deadlines,
// dead-lettering times) as early as the fault allows.
//
// # Slow links
//
// A slowed link is an htb qdisc (handle fe7:) on lo with one rate-limited
// class; u32 filters matching the chosen (source, destination) node
// addresses lead into it, so nothing else on lo is slowed. Each fault
// draws a delay of 20-150 ms, a jitter of 5-30 ms, a reordered fraction
// (5, 10 or 25%) and a loss (1, 5 or 15%). Where the kernel has netem, the
// class also delays, drops and reorders.
//
// Where it has none (a kernel without sch_netem), the harness delays in
// userspace through NFQUEUE (package nfq): rules in the chaos chain, after
// the loss rules (iptables statistic), send the chosen pair's packets to
// queue 7301 (-j NFQUEUE --queue-bypass), and a Delayer in the test
// process, speaking nfnetlink_queue over a netlink socket, holds each
// packet for the delay plus a uniform draw within ±jitter and then
// accepts it; the reordered fraction is held one delay longer, so packets
// queued after it overtake it. Verdicts come from one goroutine with a
// heap, at most 4096 packets are held (beyond that they pass at once, and
// are counted), and the kernel queue is bounded and fails open. These
// rules and the loss rules match "-o lo", that is on OUTPUT only: a
// packet between two loopback addresses crosses both OUTPUT and INPUT, and
// would otherwise be dropped or delayed twice. The fault's detail in the
// report states the delay, jitter and reordering applied and, after the
// heal, how many packets the delayer held and reordered.
//
// Healing deletes the qdisc, flushes the chain and stops the delayer,
// which accepts every packet it still holds. The qdisc, the rules and the
// delayer go too when the run ends or is interrupted, and a stale qdisc
// and chain when the next run starts; a delayer dies with its process,
// and --queue-bypass then lets the pair's packets pass. Without netem and
// without NFQUEUE (or with FERRY_CHAOS_NO_NFQUEUE=1) the link is only
// rate-limited and lossy, and the detail says so. FERRY_CHAOS_NO_TC=1
// skips these faults.
//
// # Disk faults
//
// As root, every node's data directory is its own 512 MiB tmpfs
// (FERRY_CHAOS_TMPFS=0 keeps them on disk and skips disk-full faults):
// room for a node's steady footprint under the workload (the raft log's
// active segment alone may hold 64 MiB) above the 64 MiB free-space
// reserve, so that only a disk-full fault brings a node to its reserve; on
// 192 MiB a 30-minute soak spent most of its time refusing sends. The
// soak keeps every dead letter for an hour, so its nodes get 64 MiB per
// minute of soak, at least 2 GiB. A
// disk-full fault fills one with a file until 1 MiB is left, holds, and
// deletes it: the node must refuse sends (queue full: disk full), keep
// running, and take work again. An fsync-error fault makes the node's next
// three raft log fsyncs fail (internal/diskfault, present only in chaosdisk
// builds): the batches they carried fail and are cut back, and the node
// must keep running and take writes again. A write-error fault does the
// same to the node's next three raft log writes, each failing before it
// writes anything or (drawn from the fault's seed) after writing half its
// bytes, as a failing disk's short write: the cut must leave no torn or
// duplicate record. Both target only files under the node's raftlog
// directory; body records are written while raft applies, where a failed
// write is fatal by design, so no fault targets them. The tmpfs are
// unmounted when the run ends, so a kept run keeps logs and history.json
// but not the nodes' data.
//
// At the end the harness heals everything, stops the producers, has the
// consumers ack everything until every queue is empty, lists the dead
// letters, and polls GET /v1/replicas on every node until the replicas of
// each partition report the same digest at the same applied index; a
// partition whose replicas are apart at a moment (its leader still
// proposes ticks, so the entry in flight always separates them) is
// compared at one index instead: every node is asked for its replica's
// digest right after it applies the entry after the most advanced one
// (GET /v1/replicas/{group}/digest?at=N). When replicas stay apart, or the
// queues do not drain, or the cluster does not recover from a fault, every
// node's raft state (GET /v1/debug/raft: peer liveness, each group's
// stats, each leader's view of its servers, each replica's tick state) and
// goroutines are saved beside its log. Check then judges the history (see
// its violation kinds); the run fails on any violation or on a node
// exiting by itself.
//
// The jobs queue runs with max_in_flight 40 and the mixed queue with
// max_delivery_rate 40/s: a sampler reads their partitions' stats every
// 250 ms and fails the run if one holds more leases than its share of the
// in-flight bound, or leased more over a window of 30 s or more than its
// share of the rate allows (plus the burst and a leader clock step's
// worth). 40% of the messages
// carry a priority; a delivery or dead letter with another priority than
// the one sent fails the run, and the group-order rule holds with them. Duplicates with their causes,
// unconfirmed sends and what became of them, availability gaps and
// latencies are reported, not judged.
//
// # Partitions and iptables
//
// Partition rules live in the FERRY-CHAOS chain, hooked into INPUT and
// OUTPUT. The chain is removed when a run ends, when the test process gets
// SIGINT or SIGTERM, and, should a run have been killed outright, when
// the next run starts (runs on one machine take turns, through a lock
// file). Without root or without iptables, or with
// FERRY_CHAOS_NO_IPTABLES=1, the partition faults are skipped, and the run
// says so loudly in its log and report.
//
// # Running it
//
//	go test ./test/chaos/                     # TestChaos_Bounded: each fault once, 3 nodes
//	make soak                                 # TestChaos_Soak: FERRY_SOAK_DURATION (1h)
//	make chaos                                # TestChaos_Long: FERRY_CHAOS=1, 10 minutes, 5 nodes
//	FERRY_CHAOS_DURATION=3m FERRY_CHAOS_NODES=3 FERRY_CHAOS_SEED=42 make chaos
//
// The nodes run with TLS on every port but gossip: the harness writes a
// throwaway CA and node certificates under the run's root, and its clients
// and probes trust that CA. FERRY_CHAOS_TLS=0 runs them with -insecure.
//
// make soak runs TestChaos_Soak: the workload for FERRY_SOAK_DURATION (1h)
// with a fault every 20-50 s, sampling every node's RSS, goroutines and
// open files every 10 s into the report (summarised as curves); it fails
// on a violation, a crash, or growth beyond DefaultGrowthBound once the
// load is steady. FERRY_CHAOS_FAULTS=kind,kind limits the bounded run to
// those kinds.
//
// FERRY_CHAOS_KEEP=1 keeps the data and logs of a passing run (a failing
// run always keeps them, with history.json: every recorded call and the
// final state); FERRY_CHAOS_REPORT names the JSON report's path, by
// default ferry-chaos-<seed>-<nodes>n.json in the temporary directory.
// FERRY_CHAOS_HISTORY=<dir>/history.json go test -run TestChaos_Recheck
// runs the checker again on a kept history.
package chaos
