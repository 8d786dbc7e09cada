// Package cluster holds Ferry's end-to-end cluster tests. Each test starts
// a three-node cluster in the test process (real listeners on loopback,
// real raft groups, real gossip, data in a temporary directory), drives it
// only through the public client library, and stops, restarts or wipes
// nodes to check what survives.
//
// The package has no non-test code; run it with
//
//	go test ./test/cluster/
//
// Set FERRY_TEST_LOG=1 (or a level: debug, info, warn, error) to see the
// nodes' and clients' logs.
package cluster
