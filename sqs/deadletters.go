package sqs

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/internal/auth"
	"github.com/ferrymq/ferry/wire"
)

// maxMoveTasks is how many finished message move tasks a node remembers.
const maxMoveTasks = 100

// moveTask is one StartMessageMoveTask, as ListMessageMoveTasks reports it.
type moveTask struct {
	TaskHandle                        string `json:"TaskHandle,omitempty"`
	Status                            string `json:"Status"`
	SourceArn                         string `json:"SourceArn"`
	DestinationArn                    string `json:"DestinationArn,omitempty"`
	ApproximateNumberOfMessagesMoved  int64  `json:"ApproximateNumberOfMessagesMoved"`
	ApproximateNumberOfMessagesToMove int64  `json:"ApproximateNumberOfMessagesToMove"`
	FailureReason                     string `json:"FailureReason,omitempty"`
	StartedTimestamp                  int64  `json:"StartedTimestamp"`
}

// deadLetterSources returns the queues whose RedrivePolicy names arn as
// their dead-letter target, of those the caller may run op on (the others
// are not shown: they stay hidden from a caller who may not see them).
func (s *Server) deadLetterSources(ctx context.Context, r *request, op wire.Op, arn string) ([]string, error) {
	qs, err := s.cl.ListQueues(ctx, "")
	if err != nil {
		return nil, clientError(err, "")
	}
	var out []string
	for _, q := range qs {
		if auth.Reserved(q.Name) || !r.may(op, q.Name) {
			continue
		}
		meta, err := s.meta.get(ctx, q.Name)
		if err != nil {
			return nil, clientError(err, q.Name)
		}
		if meta == nil {
			meta = &queueMeta{Name: q.Name}
		}
		v := queueView{name: q.Name, cfg: q.Config, meta: meta}
		var p redrivePolicy
		if pol := v.redrive(s.arn(q.Name)); pol != "" && json.Unmarshal([]byte(pol), &p) == nil && p.DeadLetterTargetArn == arn {
			out = append(out, q.Name)
		}
	}
	return out, nil
}

func (s *Server) listDeadLetterSourceQueues(ctx context.Context, r *request) (any, error) {
	var in struct {
		QueueUrl   string `json:"QueueUrl"`
		MaxResults *int   `json:"MaxResults"`
	}
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	v, err := s.viewOfURL(ctx, r, in.QueueUrl)
	if err != nil {
		return nil, err
	}
	names, err := s.deadLetterSources(ctx, r, wire.OpQueueStats, s.arn(v.name))
	if err != nil {
		return nil, err
	}
	var out struct {
		QueueUrls []string `json:"queueUrls"`
	}
	out.QueueUrls = []string{}
	for _, n := range names {
		out.QueueUrls = append(out.QueueUrls, s.queueURL(r, n))
	}
	return out, nil
}

// startMessageMoveTask moves dead letters back to be delivered again. In
// Ferry dead letters stay inside their source queue, so a task whose
// SourceArn is a dead-letter queue redrives the dead letters of every queue
// that names it in its RedrivePolicy (a SourceArn of a source queue
// redrives that queue's own). They go back to their source queue; another
// DestinationArn is not supported. The task runs to its end before the
// answer.
//
// The caller needs the dead-letter redrive permission on SourceArn's and
// DestinationArn's queues (checked before the action runs) and on every
// source queue it redrives: sources it may not redrive are left alone,
// and not revealed.
func (s *Server) startMessageMoveTask(ctx context.Context, r *request) (any, error) {
	var in struct {
		SourceArn      string `json:"SourceArn"`
		DestinationArn string `json:"DestinationArn"`
	}
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	v, err := s.arnView(ctx, r, in.SourceArn, "source")
	if err != nil {
		return nil, err
	}
	if in.DestinationArn != "" {
		if _, err := s.arnView(ctx, r, in.DestinationArn, "destination"); err != nil {
			return nil, err
		}
	}
	sources, err := s.deadLetterSources(ctx, r, wire.OpDeadRedrive, s.arn(v.name))
	if err != nil {
		return nil, err
	}
	if len(sources) == 0 {
		sources = []string{v.name}
	}
	if in.DestinationArn != "" && (len(sources) != 1 || nameOfARN(in.DestinationArn) != sources[0]) {
		return nil, fail(ErrUnsupportedOperation, "dead letters return to their own source queue; DestinationArn must be omitted or name it")
	}
	task := moveTask{
		TaskHandle: strconv.FormatInt(time.Now().UnixNano(), 36), SourceArn: in.SourceArn,
		DestinationArn: in.DestinationArn, StartedTimestamp: time.Now().UnixMilli(), Status: "COMPLETED",
	}
	for _, src := range sources {
		n, err := s.cl.RedriveDeadLetters(ctx, src, client.DeadFilter{})
		task.ApproximateNumberOfMessagesMoved += int64(n)
		if err != nil {
			task.Status, task.FailureReason = "FAILED", clientError(err, src).Error()
			break
		}
	}
	task.ApproximateNumberOfMessagesToMove = task.ApproximateNumberOfMessagesMoved
	s.mu.Lock()
	s.tasks = append(s.tasks, task)
	if len(s.tasks) > maxMoveTasks {
		s.tasks = s.tasks[len(s.tasks)-maxMoveTasks:]
	}
	s.mu.Unlock()
	return struct {
		TaskHandle string `json:"TaskHandle"`
	}{task.TaskHandle}, nil
}

// arnView is view of the queue an ARN names, which must be one the request
// was authorized on; a queue that does not exist is ResourceNotFound, as
// move tasks answer.
func (s *Server) arnView(ctx context.Context, r *request, arn, role string) (queueView, error) {
	if arn == "" {
		return queueView{}, fail(ErrMissingParameter, "the request must contain the parameter %sArn", strings.ToUpper(role[:1])+role[1:])
	}
	name, err := r.queue(nameOfARN(arn))
	if err != nil {
		return queueView{}, err
	}
	v, err := s.view(ctx, name)
	if errors.Is(err, ErrQueueDoesNotExist) {
		return queueView{}, fail(ErrResourceNotFound, "the %s queue %s does not exist", role, truncate(name, 96))
	}
	return v, err
}

func (s *Server) listMessageMoveTasks(ctx context.Context, r *request) (any, error) {
	var in struct {
		SourceArn  string `json:"SourceArn"`
		MaxResults *int   `json:"MaxResults"`
	}
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	if _, err := s.arnView(ctx, r, in.SourceArn, "source"); err != nil {
		return nil, err
	}
	limit := 1
	if in.MaxResults != nil {
		if *in.MaxResults < 1 || *in.MaxResults > 10 {
			return nil, fail(ErrInvalidParameterValue, "MaxResults %d (want 1..10)", *in.MaxResults)
		}
		limit = *in.MaxResults
	}
	var out struct {
		Results []moveTask `json:"Results"`
	}
	out.Results = []moveTask{}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.tasks) - 1; i >= 0 && len(out.Results) < limit; i-- {
		if s.tasks[i].SourceArn == in.SourceArn {
			t := s.tasks[i]
			if len(out.Results) > 0 || i != len(s.tasks)-1 {
				t.TaskHandle = "" // only the newest task carries its handle
			}
			out.Results = append(out.Results, t)
		}
	}
	return out, nil
}

func (s *Server) cancelMessageMoveTask(_ context.Context, r *request) (any, error) {
	var in struct {
		TaskHandle string `json:"TaskHandle"`
	}
	if err := r.decode(&in); err != nil {
		return nil, err
	}
	return nil, fail(ErrResourceNotFound, "task %s is not running: tasks finish before StartMessageMoveTask answers", truncate(in.TaskHandle, 64))
}
