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
	// Client is the endpoint's own connection to the cluster: the SQS
	// attributes are read and written through it, and every action when
	// Dial is nil.
	Client *client.Client
	// Dial, when set, opens a connection to the cluster for one caller:
	// every caller (access key) gets its own on its first request, so that
	// one caller's requests (its long polls) never wait behind another's
	// on a shared connection. Listen sets it.
	Dial func(context.Context) (*client.Client, error)
	// Limits bound each caller's requests in flight; zero fields take the
	// defaults. They must pass Limits.Validate (Listen checks).
	Limits Limits
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

// Server answers SQS requests; it is an http.Handler. Close it to close
// the callers' connections.
type Server struct {
	*core
	cl *client.Client // the connection of the caller an action serves
}

// core is the state of a Server that all its callers share.
type core struct {
	cfg     Config
	meta    *metaStore
	log     *slog.Logger
	callers *callers
	mu      sync.Mutex
	tasks   []moveTask // newest last, at most maxMoveTasks
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
	return &Server{core: &core{cfg: cfg, meta: newMetaStore(cfg.Client, cfg.MetaTTL), log: log,
		callers: newCallers(cfg.Limits, cfg.Client, cfg.Dial)}, cl: cfg.Client}
}

// Close closes the callers' connections (not Config.Client); requests
// still in flight fail, later ones are refused.
func (s *Server) Close() { s.callers.close() }

// Stats are counts of a Server for monitoring.
type Stats struct {
	// Callers is the number of callers the server keeps state for.
	Callers int
	// Throttled counts the requests refused with ErrRequestThrottled.
	Throttled uint64
}

// Stats returns the server's counts now.
func (s *Server) Stats() Stats {
	return Stats{Callers: s.callers.count(), Throttled: s.callers.throttled.Load()}
}

// call runs act for the caller of hr within the caller's bounds and on
// its own connection. hr passed the signature check: from here on the
// connection may be kept open after the answer.
func (s *Server) call(w http.ResponseWriter, hr *http.Request, name string, act action, r *request) (any, error) {
	w.Header().Del("Connection")
	poll := name == "ReceiveMessage"
	c, err := s.callers.admit(callerKey(hr), poll)
	if err != nil {
		return nil, err
	}
	defer s.callers.release(c, poll)
	cl, err := s.callers.client(hr.Context(), c)
	if err != nil {
		return nil, err
	}
	return act(&Server{core: s.core, cl: cl}, hr.Context(), r)
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

// ServeHTTP answers one SQS JSON protocol request. A request that fails
// before its signature checks closes its connection after the answer.
func (s *Server) ServeHTTP(w http.ResponseWriter, hr *http.Request) {
	w.Header().Set("Connection", "close")
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
	out, err := s.call(w, hr, name, act, &request{body: body, host: hr.Host, tls: hr.TLS != nil, tok: who.tok, who: who, checked: checked})
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
