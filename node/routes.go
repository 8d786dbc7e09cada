package node

import (
	"context"
	"reflect"

	"github.com/ferrymq/ferry/partition"
	"github.com/ferrymq/ferry/wire"
)

// The request table: one entry per wire op says what permission a request
// of that kind needs (the queue it names and the op auth's table knows)
// and which handler serves it. Dispatch and authorization both read it, so
// a new request kind is one entry here plus its handler (and its wire
// types and partition method). TestRoutes_EveryOpHasOneEntry checks that
// every op the wire decodes has an entry for its body type.

// route serves one request kind.
type route struct {
	// body is the request body type the entry takes (wire.NewRequestBody's).
	body reflect.Type
	// action names the queue the request touches and the op whose
	// permission it needs (auth.OpNeed).
	action func(in any) (queue string, op wire.Op)
	// serve runs the handler; in has type body.
	serve func(n *Node, ctx context.Context, in any) (any, error)
}

// routeOf makes the entry of body type R: action names its queue and op,
// serve is its handler.
func routeOf[R, S any](action func(*R) (string, wire.Op), serve func(*Node, context.Context, *R) (S, error)) route {
	return route{
		body:   reflect.TypeFor[*R](),
		action: func(in any) (string, wire.Op) { return action(in.(*R)) },
		serve:  func(n *Node, ctx context.Context, in any) (any, error) { return serve(n, ctx, in.(*R)) },
	}
}

// onQueue is the action of a request that needs op's permission on the
// queue it names.
func onQueue[R any](op wire.Op, queue func(*R) string) func(*R) (string, wire.Op) {
	return func(r *R) (string, wire.Op) { return queue(r), op }
}

// onCluster is the action of a request that needs op's permission on the
// cluster (no queue).
func onCluster[R any](op wire.Op) func(*R) (string, wire.Op) {
	return func(*R) (string, wire.Op) { return "", op }
}

// routes is the request table, by op.
var routes = map[wire.Op]route{
	wire.OpSend:     routeOf(onQueue(wire.OpSend, func(r *wire.SendRequest) string { return r.Queue }), (*Node).handleSend),
	wire.OpReceive:  routeOf(onQueue(wire.OpReceive, func(r *wire.ReceiveRequest) string { return r.Queue }), (*Node).handleReceive),
	wire.OpAck:      routeOf(onQueue(wire.OpAck, func(r *wire.AckRequest) string { return r.Queue }), (*Node).handleAck),
	wire.OpExtend:   routeOf(onQueue(wire.OpExtend, func(r *wire.ExtendRequest) string { return r.Queue }), (*Node).handleExtend),
	wire.OpNack:     routeOf(onQueue(wire.OpNack, func(r *wire.NackRequest) string { return r.Queue }), (*Node).handleNack),
	wire.OpReject:   routeOf(onQueue(wire.OpReject, func(r *wire.RejectRequest) string { return r.Queue }), (*Node).handleReject),
	wire.OpPeek:     routeOf(onQueue(wire.OpPeek, func(r *wire.PeekRequest) string { return r.Queue }), (*Node).handlePeek),
	wire.OpDeadList: routeOf(onQueue(wire.OpDeadList, func(r *wire.DeadListRequest) string { return r.Queue }), (*Node).serveDeadList),
	wire.OpDeadPeek: routeOf(onQueue(wire.OpDeadPeek, func(r *wire.DeadPeekRequest) string { return r.Queue }), (*Node).serveDeadPeek),
	wire.OpDeadRedrive: routeOf(onQueue(wire.OpDeadRedrive, func(r *wire.DeadRedriveRequest) string { return r.Queue }),
		(*Node).serveDeadRedrive),
	wire.OpDeadDelete: routeOf(onQueue(wire.OpDeadDelete, func(r *wire.DeadDeleteRequest) string { return r.Queue }),
		(*Node).serveDeadDelete),
	wire.OpPurge: routeOf(onQueue(wire.OpPurge, func(r *wire.PurgeRequest) string { return r.Queue }), (*Node).handlePurge),
	wire.OpPause: routeOf(onQueue(wire.OpPause, func(r *wire.PauseRequest) string { return r.Queue }), (*Node).handlePause),
	wire.OpFindMessage: routeOf(onQueue(wire.OpFindMessage, func(r *wire.FindMessageRequest) string { return r.Queue }),
		(*Node).handleFindMessage),
	wire.OpDeleteMessage: routeOf(onQueue(wire.OpDeleteMessage, func(r *wire.DeleteMessageRequest) string { return r.Queue }),
		(*Node).handleDeleteMessage),
	wire.OpDeleteMessages: routeOf(onQueue(wire.OpDeleteMessages, func(r *wire.DeleteMessagesRequest) string { return r.Queue }),
		(*Node).handleDeleteMessages),
	wire.OpSetSchedule: routeOf(onQueue(wire.OpSetSchedule, func(r *wire.SetScheduleRequest) string { return r.Queue }),
		(*Node).handleSetSchedule),
	wire.OpListSchedules: routeOf(onQueue(wire.OpListSchedules, func(r *wire.ListSchedulesRequest) string { return r.Queue }),
		(*Node).handleListSchedules),
	wire.OpDeleteSchedule: routeOf(onQueue(wire.OpDeleteSchedule, func(r *wire.DeleteScheduleRequest) string { return r.Queue }),
		(*Node).handleDeleteSchedule),
	wire.OpQueueStats: routeOf(onQueue(wire.OpQueueStats, func(r *wire.QueueStatsRequest) string { return r.Queue }), (*Node).handleStats),
	wire.OpMetadata:   routeOf(metadataAction, (*Node).handleMetadata),
	wire.OpListQueues: routeOf(onCluster[wire.ListQueuesRequest](wire.OpListQueues), (*Node).handleListQueues),
	wire.OpCreateQueue: routeOf(onQueue(wire.OpCreateQueue, func(r *wire.CreateQueueRequest) string { return r.Name }),
		(*Node).handleCreateQueue),
	wire.OpUpdateQueue: routeOf(onQueue(wire.OpUpdateQueue, func(r *wire.UpdateQueueRequest) string { return r.Name }),
		(*Node).handleUpdateQueue),
	wire.OpDeleteQueue: routeOf(onQueue(wire.OpDeleteQueue, func(r *wire.DeleteQueueRequest) string { return r.Name }),
		(*Node).handleDeleteQueue),
	wire.OpRemoveNode: routeOf(onCluster[wire.RemoveNodeRequest](wire.OpRemoveNode), (*Node).removeNode),
	wire.OpListNodes:  routeOf(onCluster[wire.ListNodesRequest](wire.OpListNodes), (*Node).handleListNodes),
	wire.OpDrainNode:  routeOf(onCluster[wire.DrainNodeRequest](wire.OpDrainNode), (*Node).drainNode),
	wire.OpRebalance:  routeOf(onCluster[wire.RebalanceRequest](wire.OpRebalance), (*Node).handleRebalance),
	wire.OpSafeToStop: routeOf(onCluster[wire.SafeToStopRequest](wire.OpSafeToStop), (*Node).handleSafeToStop),
	wire.OpQueueSettings: routeOf(onCluster[wire.QueueSettingsRequest](wire.OpQueueSettings),
		(*Node).handleQueueSettings),
}

// routesByBody is the request table by body type (for requiredAction).
var routesByBody = func() map[reflect.Type]route {
	out := make(map[reflect.Type]route, len(routes))
	for _, rt := range routes {
		out[rt.body] = rt
	}
	return out
}()

// metadataAction: a metadata request naming a queue needs permission to
// see it; one without a queue is a listing.
func metadataAction(r *wire.MetadataRequest) (string, wire.Op) {
	if r.Queue != "" {
		return r.Queue, wire.OpMetadata
	}
	return "", wire.OpListQueues
}

// serveDeadList lists dead letters without their bodies.
func (n *Node) serveDeadList(ctx context.Context, r *wire.DeadListRequest) (*wire.DeadListResponse, error) {
	page, err := n.handleDeadList(ctx, r.Queue, r.Partition, r.Filter, false)
	if err != nil {
		return nil, err
	}
	return &wire.DeadListResponse{Letters: page.Letters}, nil
}

// serveDeadPeek lists dead letters with their bodies.
func (n *Node) serveDeadPeek(ctx context.Context, r *wire.DeadPeekRequest) (*wire.DeadPeekResponse, error) {
	return n.handleDeadList(ctx, r.Queue, r.Partition, r.Filter, true)
}

// serveDeadRedrive puts the dead letters a filter selects back in the queue.
func (n *Node) serveDeadRedrive(ctx context.Context, r *wire.DeadRedriveRequest) (*wire.DeadRedriveResponse, error) {
	return n.handleDeadChange(ctx, r.Queue, r.Partition, (*partition.Partition).RedriveDead, r.Filter)
}

// serveDeadDelete deletes the dead letters a filter selects.
func (n *Node) serveDeadDelete(ctx context.Context, r *wire.DeadDeleteRequest) (*wire.DeadDeleteResponse, error) {
	res, err := n.handleDeadChange(ctx, r.Queue, r.Partition, (*partition.Partition).DeleteDead, r.Filter)
	return (*wire.DeadDeleteResponse)(res), err
}
