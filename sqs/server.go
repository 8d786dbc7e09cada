package sqs

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/internal/auth"
)

// Limits of the API.
const (
	// MaxMessageBytes is the largest message (body plus attributes) and
	// the largest batch of messages, as in SQS.
	MaxMessageBytes = 256 << 10
	// MaxRequestBytes bounds a request body: a full batch of the largest
	// messages with JSON escaping and the fields around them. A larger
	// body is refused before it is read.
	MaxRequestBytes = 2 << 20
	// MaxBatchEntries is the most entries of a batch request.
	MaxBatchEntries = 10
	// DefaultRegion and DefaultAccountID name queues in ARNs when Config
	// leaves them empty.
	DefaultRegion    = "us-east-1"
	DefaultAccountID = "000000000000"
	// DefaultMetaTTL is how long a node trusts its copy of a queue's SQS
	// attributes before reading them again.
	DefaultMetaTTL = 2 * time.Second
)

// Config configures a Server.
type Config struct {
	// Client is the connection to the cluster every action uses.
	Client *client.Client
	// Region and AccountID appear in queue ARNs and URLs; empty means
	// DefaultRegion and DefaultAccountID.
	Region, AccountID string
	// Credentials, when set, verifies Signature Version 4 signatures
	// against the secret of the request's access key id. Nil parses the
	// signature headers but does not check them.
	Credentials Credentials
	// MetaTTL is how long cached SQS attributes are trusted; 0 means
	// DefaultMetaTTL.
	MetaTTL time.Duration
	// Logger receives request failures of the server's own making; nil
	// discards them.
	Logger *slog.Logger
}

// Server answers SQS requests; it is an http.Handler.
type Server struct {
	cfg   Config
	cl    *client.Client
	meta  *metaStore
	log   *slog.Logger
	mu    sync.Mutex
	tasks []moveTask // newest last, at most maxMoveTasks
}

// New returns a server that serves through cfg.Client.
func New(cfg Config) *Server {
	if cfg.Region == "" {
		cfg.Region = DefaultRegion
	}
	if cfg.AccountID == "" {
		cfg.AccountID = DefaultAccountID
	}
	if cfg.MetaTTL <= 0 {
		cfg.MetaTTL = DefaultMetaTTL
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Server{cfg: cfg, cl: cfg.Client, meta: newMetaStore(cfg.Client, cfg.MetaTTL), log: log}
}

// action is one API action: it decodes its input from raw JSON and
// returns the value to encode as the answer.
type action func(s *Server, ctx context.Context, r *request) (any, error)

// request is one decoded call.
type request struct {
	body []byte
	host string // for queue URLs
	tls  bool
	tok  *auth.Token // the caller's permissions; nil: every permission
	who  caller      // who signed it (for a new look at its key: revoked)
	// checked are the queues the action was authorized on (authorize);
	// request.queue refuses any other.
	checked []string
}

// decode unmarshals the request body into v, refusing unknown shapes.
func (r *request) decode(v any) error {
	body := r.body
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fail(ErrSerialization, "request body: %v", err)
	}
	return nil
}

var actions = map[string]action{
	"CreateQueue":                  (*Server).createQueue,
	"GetQueueUrl":                  (*Server).getQueueURL,
	"ListQueues":                   (*Server).listQueues,
	"GetQueueAttributes":           (*Server).getQueueAttributes,
	"SetQueueAttributes":           (*Server).setQueueAttributes,
	"DeleteQueue":                  (*Server).deleteQueue,
	"PurgeQueue":                   (*Server).purgeQueue,
	"TagQueue":                     (*Server).tagQueue,
	"UntagQueue":                   (*Server).untagQueue,
	"ListQueueTags":                (*Server).listQueueTags,
	"SendMessage":                  (*Server).sendMessage,
	"SendMessageBatch":             (*Server).sendMessageBatch,
	"ReceiveMessage":               (*Server).receiveMessage,
	"DeleteMessage":                (*Server).deleteMessage,
	"DeleteMessageBatch":           (*Server).deleteMessageBatch,
	"ChangeMessageVisibility":      (*Server).changeMessageVisibility,
	"ChangeMessageVisibilityBatch": (*Server).changeMessageVisibilityBatch,
	"ListDeadLetterSourceQueues":   (*Server).listDeadLetterSourceQueues,
	"StartMessageMoveTask":         (*Server).startMessageMoveTask,
	"ListMessageMoveTasks":         (*Server).listMessageMoveTasks,
	"CancelMessageMoveTask":        (*Server).cancelMessageMoveTask,
	"AddPermission":                unsupported("AddPermission"),
	"RemovePermission":             unsupported("RemovePermission"),
}

func unsupported(name string) action {
	return func(*Server, context.Context, *request) (any, error) {
		return nil, fail(ErrUnsupportedOperation, "%s is not supported by Ferry", name)
	}
}

const targetPrefix = "AmazonSQS."

// ServeHTTP answers one SQS JSON protocol request.
func (s *Server) ServeHTTP(w http.ResponseWriter, hr *http.Request) {
	if hr.Method != http.MethodPost && hr.Method != http.MethodGet {
		s.writeError(w, fail(ErrInvalidAction, "method %s: the API takes POST (or query GET) requests", hr.Method))
		return
	}
	target := hr.Header.Get("X-Amz-Target")
	if target == "" {
		s.serveQueryRequest(w, hr)
		return
	}
	name, ok := strings.CutPrefix(target, targetPrefix)
	act := actions[name]
	if !ok || act == nil {
		s.writeError(w, fail(ErrInvalidAction, "unknown X-Amz-Target %q (want %s<Action>)", truncate(target, 64), targetPrefix))
		return
	}
	if hr.Method != http.MethodPost {
		s.writeError(w, fail(ErrInvalidAction, "method %s: the JSON protocol takes POST requests", hr.Method))
		return
	}
	body, err := readBody(hr)
	if err != nil {
		s.writeError(w, asError(err))
		return
	}
	who, err := s.checkSignature(hr, body)
	var checked []string
	if err == nil {
		checked, err = authorize(who.tok, name, body)
	}
	if err != nil {
		s.writeError(w, asError(err))
		return
	}
	out, err := act(s, hr.Context(), &request{body: body, host: hr.Host, tls: hr.TLS != nil, tok: who.tok, who: who, checked: checked})
	if err != nil {
		e := asError(err)
		if !e.sender() {
			s.log.Warn("sqs request failed", "action", name, "err", err)
		}
		s.writeError(w, e)
		return
	}
	if out == nil {
		out = struct{}{}
	}
	s.writeJSON(w, http.StatusOK, out)
}

func (s *Server) writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"__type":"com.amazonaws.sqs#InternalFailure","message":"encoding answer"}`)
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.0")
	w.Header().Set("x-amzn-RequestId", requestID())
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func (s *Server) writeError(w http.ResponseWriter, e *Error) {
	fault := "Sender"
	if !e.sender() {
		fault = "Receiver"
	}
	w.Header().Set("x-amzn-query-error", e.Code.QueryCode+";"+fault)
	s.writeJSON(w, e.Code.Status, struct {
		Type    string `json:"__type"`
		Message string `json:"message"`
	}{"com.amazonaws.sqs#" + e.Code.Type, e.Message})
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// clientError maps an error of the Go client to an SQS error.
func clientError(err error, queue string) error {
	var e *Error
	switch {
	case errors.As(err, &e):
		return e
	case errors.Is(err, client.ErrQueueNotFound):
		return fail(ErrQueueDoesNotExist, "the specified queue %s does not exist", queue)
	case errors.Is(err, client.ErrInvalidArgument), errors.Is(err, client.ErrInvalidConfig):
		return fail(ErrInvalidParameterValue, "%v", err)
	case errors.Is(err, client.ErrMessageTooLarge):
		return fail(ErrInvalidParameterValue, "message too large: %v", err)
	case errors.Is(err, client.ErrLimitExceeded), errors.Is(err, client.ErrQueueFull):
		return fail(ErrOverLimit, "%v", err)
	case errors.Is(err, client.ErrUnavailable), errors.Is(err, client.ErrTimeout),
		errors.Is(err, client.ErrUnconfirmed), errors.Is(err, context.DeadlineExceeded),
		errors.Is(err, context.Canceled):
		return fail(ErrServiceUnavailable, "%v", err)
	}
	return fail(ErrInternalFailure, "%v", err)
}

// requestID returns a fresh random request id.
func requestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// readBody reads a request body of at most MaxRequestBytes.
func readBody(hr *http.Request) ([]byte, error) {
	if hr.ContentLength > MaxRequestBytes {
		return nil, fail(ErrRequestTooLarge, "request body of %d bytes (at most %d)", hr.ContentLength, MaxRequestBytes)
	}
	body, err := io.ReadAll(io.LimitReader(hr.Body, MaxRequestBytes+1))
	if err != nil {
		return nil, fail(ErrSerialization, "reading request body: %v", err)
	}
	if len(body) > MaxRequestBytes {
		return nil, fail(ErrRequestTooLarge, "request body over %d bytes", MaxRequestBytes)
	}
	return body, nil
}
