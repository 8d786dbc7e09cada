package wire

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestWire_CodeNumbersPinned fails when a code's number changes: numbers
// travel between binaries of different versions.
func TestWire_CodeNumbersPinned(t *testing.T) {
	pinned := []struct {
		code Code
		num  uint16
		name string
	}{
		{CodeOK, 0, "ok"},
		{CodeInternal, 1, "internal error"},
		{CodeMalformed, 2, "malformed request"},
		{CodeProtocolVersion, 3, "unsupported protocol version"},
		{CodeInvalidArgument, 4, "invalid argument"},
		{CodeInvalidConfig, 5, "invalid queue config"},
		{CodeQueueNotFound, 6, "queue not found"},
		{CodeQueueExists, 7, "queue exists"},
		{CodeNotLeader, 8, "not leader"},
		{CodeUnavailable, 9, "unavailable"},
		{CodeTimeout, 10, "timeout"},
		{CodeQueueFull, 11, "queue full"},
		{CodeMessageTooLarge, 12, "message too large"},
		{CodeLeaseLost, 13, "lease lost"},
		{CodeMessageNotFound, 14, "message not found"},
		{CodeFrameTooLarge, 15, "frame too large"},
		{CodeLimitExceeded, 16, "limit exceeded"},
		{CodeTooManyConnections, 17, "too many connections"},
		{CodeUnauthorized, 18, "unauthorized"},
	}
	if len(pinned) != int(codeEnd) {
		t.Fatalf("%d codes pinned, %d defined: pin the new ones", len(pinned), codeEnd)
	}
	for _, p := range pinned {
		if uint16(p.code) != p.num {
			t.Errorf("%s is %d, was %d", p.name, uint16(p.code), p.num)
		}
		if got := p.code.String(); got != p.name {
			t.Errorf("Code(%d).String() = %q, want %q", p.num, got, p.name)
		}
		if !p.code.Known() {
			t.Errorf("%s not known", p.name)
		}
	}
	for _, c := range []Code{codeEnd, 999, 0xffff} {
		if got, want := c.String(), fmt.Sprintf("code(%d)", uint16(c)); got != want || c.Known() {
			t.Errorf("unknown code %d: %q known=%v", uint16(c), got, c.Known())
		}
	}
}

func TestWire_OpNumbersAndNames(t *testing.T) {
	pinned := []struct {
		op   Op
		num  uint8
		name string
	}{
		{OpMetadata, 1, "metadata"}, {OpCreateQueue, 2, "create-queue"},
		{OpUpdateQueue, 3, "update-queue"}, {OpDeleteQueue, 4, "delete-queue"},
		{OpListQueues, 5, "list-queues"}, {OpQueueStats, 6, "queue-stats"},
		{OpSend, 7, "send"}, {OpReceive, 8, "receive"}, {OpAck, 9, "ack"},
		{OpExtend, 10, "extend"}, {OpNack, 11, "nack"}, {OpReject, 12, "reject"},
		{OpDeadList, 13, "dead-list"}, {OpDeadPeek, 14, "dead-peek"},
		{OpDeadRedrive, 15, "dead-redrive"}, {OpDeadDelete, 16, "dead-delete"},
		{OpPurge, 17, "purge"}, {OpPeek, 18, "peek"}, {OpRemoveNode, 19, "remove-node"},
		{OpListNodes, 20, "list-nodes"}, {OpDrainNode, 21, "drain-node"}, {OpRebalance, 22, "rebalance"}, {OpSafeToStop, 23, "safe-to-stop"},
		{OpQueueSettings, 24, "queue-settings"}, {OpPause, 25, "pause"},
		{OpFindMessage, 26, "find-message"}, {OpDeleteMessage, 27, "delete-message"},
		{OpDeleteMessages, 28, "delete-messages"},
		{OpSetSchedule, 29, "set-schedule"}, {OpListSchedules, 30, "list-schedules"}, {OpDeleteSchedule, 31, "delete-schedule"},
	}
	if len(pinned) != int(opEnd-1) {
		t.Fatalf("%d ops pinned, %d defined", len(pinned), opEnd-1)
	}
	for _, p := range pinned {
		if uint8(p.op) != p.num || p.op.String() != p.name || !p.op.Valid() {
			t.Errorf("op %q: number %d (want %d), String %q, valid %v",
				p.name, uint8(p.op), p.num, p.op.String(), p.op.Valid())
		}
	}
	for _, o := range []Op{0, opEnd, 255} {
		if got, want := o.String(), fmt.Sprintf("op(%d)", uint8(o)); got != want || o.Valid() {
			t.Errorf("unknown op %d: %q valid=%v", uint8(o), got, o.Valid())
		}
	}
}

func TestWire_Retryable(t *testing.T) {
	retry := map[Code]bool{CodeNotLeader: true, CodeUnavailable: true, CodeTimeout: true, CodeQueueFull: true,
		CodeTooManyConnections: true}
	for c := Code(0); c <= codeEnd; c++ {
		if c.Retryable() != retry[c] {
			t.Errorf("%s: Retryable() = %v", c, c.Retryable())
		}
	}
	if !Errorf(CodeQueueFull, "x").Retryable() || (*Error)(nil).Retryable() {
		t.Error("Error.Retryable disagrees with its code")
	}
}

func TestWire_SentinelsMatchByCode(t *testing.T) {
	sentinels := map[Code]*Error{
		CodeInternal: ErrInternal, CodeMalformed: ErrMalformed, CodeProtocolVersion: ErrProtocolVersion,
		CodeInvalidArgument: ErrInvalidArgument, CodeInvalidConfig: ErrInvalidConfig,
		CodeQueueNotFound: ErrQueueNotFound, CodeQueueExists: ErrQueueExists, CodeNotLeader: ErrNotLeader,
		CodeUnavailable: ErrUnavailable, CodeTimeout: ErrTimeout, CodeQueueFull: ErrQueueFull,
		CodeMessageTooLarge: ErrMessageTooLarge, CodeLeaseLost: ErrLeaseLost,
		CodeMessageNotFound: ErrMessageNotFound, CodeFrameTooLarge: ErrFrameTooLarge,
		CodeLimitExceeded:      ErrLimitExceeded,
		CodeTooManyConnections: ErrTooManyConnections,
		CodeUnauthorized:       ErrUnauthorized,
	}
	if len(sentinels) != int(codeEnd-1) {
		t.Fatalf("%d sentinels for %d error codes", len(sentinels), codeEnd-1)
	}
	for code, s := range sentinels {
		if s.Code != code {
			t.Errorf("sentinel for %s has code %s", code, s.Code)
		}
		err := fmt.Errorf("partition 3: %w", AsError(code, "some detail"))
		for other, o := range sentinels {
			want := other == code || (code == CodeFrameTooLarge && other == CodeMessageTooLarge)
			if got := errors.Is(err, o); got != want {
				t.Errorf("errors.Is(%s error, sentinel %s) = %v", code, other, got)
			}
		}
	}
	if !errors.Is(ErrMalformedFrame, ErrMalformed) || errors.Is(ErrQueueFull, errors.New("queue full")) {
		t.Error("ErrMalformedFrame/ErrMalformed or foreign error matching wrong")
	}
	if AsError(CodeOK, "ignored") != nil {
		t.Error("AsError(CodeOK) is not nil")
	}
}

func TestWire_ErrorText(t *testing.T) {
	cases := map[string]*Error{
		"ferry: queue full":                                   {Code: CodeQueueFull},
		"ferry: queue not found: orders":                      {Code: CodeQueueNotFound, Message: "orders"},
		"ferry: not leader: partition 2 (leader at b:7400)":   {Code: CodeNotLeader, Message: "partition 2", Leader: "b:7400"},
		"ferry: code(4000): from a newer server":              {Code: 4000, Message: "from a newer server"},
		"ferry: unsupported protocol version (leader at x:1)": {Code: CodeProtocolVersion, Leader: "x:1"},
		// A server's error text passed on whole is not prefixed again.
		"ferry: queue full: partition at max_depth 10":   {Code: CodeQueueFull, Message: "queue full: partition at max_depth 10"},
		"ferry: queue not found: orders ":                {Code: CodeQueueNotFound, Message: "ferry: queue not found: orders "},
		"ferry: message too large":                       {Code: CodeMessageTooLarge, Message: "message too large"},
		"ferry: timeout: timeout of the commit":          {Code: CodeTimeout, Message: "ferry: timeout: timeout of the commit"},
		"ferry: lease lost: lease lostness is a feeling": {Code: CodeLeaseLost, Message: "lease lost: lease lostness is a feeling"},
	}
	for want, e := range cases {
		if got := e.Error(); got != want {
			t.Errorf("got %q, want %q", got, want)
		}
	}
	if (*Error)(nil).Error() == "" {
		t.Error("nil Error has no text")
	}
}

func TestWire_ErrorResponses(t *testing.T) {
	cases := []struct {
		err    error
		code   Code
		msg    string
		leader string
	}{
		{nil, CodeOK, "", ""},
		{Errorf(CodeQueueNotFound, "queue %q", "orders"), CodeQueueNotFound, `queue "orders"`, ""},
		{&Error{Code: CodeNotLeader, Leader: "b:1"}, CodeNotLeader, "", "b:1"},
		{fmt.Errorf("partition 2: %w", &Error{Code: CodeNotLeader, Leader: "c:1"}), CodeNotLeader, "partition 2", "c:1"},
		{fmt.Errorf("send: %w", Errorf(CodeQueueFull, "max_depth 10")), CodeQueueFull, "send: max_depth 10", ""},
		{fmt.Errorf("apply: %w", context.DeadlineExceeded), CodeTimeout, "apply: context deadline exceeded", ""},
		{errors.New("disk on fire"), CodeInternal, "disk on fire", ""},
	}
	for _, tc := range cases {
		resp := ErrorResponse(5, tc.err)
		if resp.ID != 5 || resp.Code != tc.code || resp.Error != tc.msg || resp.Leader != tc.leader {
			t.Errorf("ErrorResponse(%v) = %+v", tc.err, resp)
		}
		if CodeOf(tc.err) != tc.code {
			t.Errorf("CodeOf(%v) = %s", tc.err, CodeOf(tc.err))
		}
		var back Response
		frameTrip(t, resp, &back)
		err := back.Err()
		if tc.code == CodeOK {
			if err != nil {
				t.Errorf("OK response gives error %v", err)
			}
			continue
		}
		var we *Error
		if !errors.As(err, &we) || we.Code != tc.code || we.Leader != tc.leader || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("decoded error %v from %+v", err, back)
		}
		if derr := back.Decode(&PurgeResponse{}); !errors.Is(derr, &Error{Code: tc.code}) {
			t.Errorf("Decode of a failed response returned %v", derr)
		}
	}
}

func TestWire_ItemErrors(t *testing.T) {
	if (ItemResult{}).Err() != nil || (SendResult{Seq: 1}).Err() != nil || (PartitionStats{}).Err() != nil {
		t.Error("OK item has an error")
	}
	if !errors.Is(ItemResult{Code: CodeLeaseLost}.Err(), ErrLeaseLost) ||
		!errors.Is(SendResult{Code: CodeMessageTooLarge}.Err(), ErrMessageTooLarge) ||
		!errors.Is(PartitionStats{Code: CodeUnavailable}.Err(), ErrUnavailable) {
		t.Error("item error does not match its sentinel")
	}
}
