package transport

import (
	"github.com/ferrymq/ferry/internal/raftutil"
	"github.com/hashicorp/raft"
)

// NewTransport returns a raft.NetworkTransport for the group of layer,
// configured by cfg (zero fields take the documented defaults: MaxPool
// DefaultMaxPool, Timeout DefaultTimeout). The transport owns layer from
// then on: its Close closes layer, which unregisters the group. Close it
// after raft.Raft.Shutdown has returned.
//
// AppendEntries requests are cut into RPCs of at most cfg.RPCBytesMax bytes
// of entry data (see BoundedTransport).
func NewTransport(layer *StreamLayer, cfg TransportConfig) *BoundedTransport {
	cfg = cfg.withDefaults()
	logger := raftutil.NewHCLogger(cfg.Logger.With("group", layer.ID())).Named("raft-net")
	return &BoundedTransport{RPCBytesMax: cfg.RPCBytesMax, Transport: raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		ServerAddressProvider: cfg.AddressProvider,
		Logger:                logger,
		Stream:                layer,
		MaxPool:               cfg.MaxPool,
		Timeout:               cfg.Timeout,
	})}
}
