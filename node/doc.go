// Package node is one member of a Ferry cluster: the glue between the
// subsystems. It owns the node's listeners (one TCP port for all raft
// traffic, one for the client protocol, one for HTTP admin and metrics, and
// memberlist gossip), the meta raft group holding the queue catalog, and the
// partition replicas the catalog assigns to this node. It serves the wire
// protocol by handing each request to the local partition leader, or by
// answering "not leader" with the leader's client address. Every request
// kind has one entry in the request table (routes.go): the permission it
// needs and its handler; the handlers convert between wire and the
// partition's typed methods and check nothing the state machine owns.
//
// The web dashboard (package dashboard) reads the cluster through the Go
// client dialled at this node's own client port, with the viewer's token,
// so node imports client: that way the dashboard can do no more than the
// person looking at it. On the client port a connection presenting a node
// certificate of the cluster CA is a cluster member with every right, the
// trust the raft port gives the same certificate (the SQS endpoint beside
// a node dials that way); users get tokens.
//
// It must never change queue state except through a partition's Propose, nor
// the catalog except through the meta group's proposals.
package node
