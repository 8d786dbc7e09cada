package sqs

import (
	"errors"
	"fmt"
	"net/http"
)

// Errors of the package. Every error the API answers with carries one of
// these codes; Error matches them with errors.Is.
var (
	// ErrQueueDoesNotExist: the queue named by QueueUrl or QueueName does
	// not exist.
	ErrQueueDoesNotExist = newCode("QueueDoesNotExist", "AWS.SimpleQueueService.NonExistentQueue", http.StatusBadRequest)
	// ErrQueueNameExists: CreateQueue named an existing queue with other
	// attributes.
	ErrQueueNameExists = newCode("QueueNameExists", "QueueAlreadyExists", http.StatusBadRequest)
	// ErrReceiptHandleIsInvalid: a receipt handle is malformed, names
	// another queue, or names a delivery that is no longer current.
	ErrReceiptHandleIsInvalid = newCode("ReceiptHandleIsInvalid", "ReceiptHandleIsInvalid", http.StatusBadRequest)
	// ErrMessageNotInflight: ChangeMessageVisibility named a message that
	// is not leased under that handle.
	ErrMessageNotInflight = newCode("MessageNotInflight", "AWS.SimpleQueueService.MessageNotInflight", http.StatusBadRequest)
	// ErrInvalidParameterValue: a parameter is out of range or malformed.
	ErrInvalidParameterValue = newCode("InvalidParameterValue", "InvalidParameterValue", http.StatusBadRequest)
	// ErrInvalidMessageContents: a message body holds characters SQS does
	// not allow.
	ErrInvalidMessageContents = newCode("InvalidMessageContents", "InvalidMessageContents", http.StatusBadRequest)
	// ErrMissingParameter: a required parameter is absent.
	ErrMissingParameter = newCode("MissingParameter", "MissingParameter", http.StatusBadRequest)
	// ErrInvalidAttributeName: an attribute name is unknown.
	ErrInvalidAttributeName = newCode("InvalidAttributeName", "InvalidAttributeName", http.StatusBadRequest)
	// ErrInvalidAttributeValue: a queue attribute has a bad value.
	ErrInvalidAttributeValue = newCode("InvalidAttributeValue", "InvalidAttributeValue", http.StatusBadRequest)
	// ErrTooManyEntriesInBatchRequest: a batch has more than MaxBatchEntries.
	ErrTooManyEntriesInBatchRequest = newCode("TooManyEntriesInBatchRequest", "AWS.SimpleQueueService.TooManyEntriesInBatchRequest", http.StatusBadRequest)
	// ErrEmptyBatchRequest: a batch has no entries.
	ErrEmptyBatchRequest = newCode("EmptyBatchRequest", "AWS.SimpleQueueService.EmptyBatchRequest", http.StatusBadRequest)
	// ErrBatchEntryIdsNotDistinct: two entries of a batch share an Id.
	ErrBatchEntryIdsNotDistinct = newCode("BatchEntryIdsNotDistinct", "AWS.SimpleQueueService.BatchEntryIdsNotDistinct", http.StatusBadRequest)
	// ErrInvalidBatchEntryID: an entry Id is empty, too long or has other
	// characters than alphanumerics, hyphens and underscores.
	ErrInvalidBatchEntryID = newCode("InvalidBatchEntryId", "AWS.SimpleQueueService.InvalidBatchEntryId", http.StatusBadRequest)
	// ErrBatchRequestTooLong: the messages of a batch exceed the size limit
	// together.
	ErrBatchRequestTooLong = newCode("BatchRequestTooLong", "AWS.SimpleQueueService.BatchRequestTooLong", http.StatusBadRequest)
	// ErrUnsupportedOperation: the action exists in SQS but not here.
	ErrUnsupportedOperation = newCode("UnsupportedOperation", "AWS.SimpleQueueService.UnsupportedOperation", http.StatusBadRequest)
	// ErrInvalidAction: the action is unknown.
	ErrInvalidAction = newCode("InvalidAction", "InvalidAction", http.StatusBadRequest)
	// ErrSerialization: the request body is not valid JSON of the action's
	// shape.
	ErrSerialization = newCode("SerializationException", "SerializationException", http.StatusBadRequest)
	// ErrRequestTooLarge: the request body exceeds MaxRequestBytes.
	ErrRequestTooLarge = newCode("RequestEntityTooLarge", "RequestEntityTooLarge", http.StatusRequestEntityTooLarge)
	// ErrIncompleteSignature: the Authorization header is not a well-formed
	// Signature Version 4 header.
	ErrIncompleteSignature = newCode("IncompleteSignature", "IncompleteSignature", http.StatusBadRequest)
	// ErrInvalidClientTokenID: the access key id is not known.
	ErrInvalidClientTokenID = newCode("InvalidClientTokenId", "InvalidClientTokenId", http.StatusForbidden)
	// ErrAccessDenied: the access key's token lacks the permission the
	// action needs on its queue.
	ErrAccessDenied = newCode("AccessDeniedException", "AccessDenied", http.StatusBadRequest)
	// ErrRequestExpired: the signature's date is too far from now.
	ErrRequestExpired = newCode("RequestExpired", "RequestExpired", http.StatusBadRequest)
	// ErrSignatureDoesNotMatch: the signature does not check.
	ErrSignatureDoesNotMatch = newCode("SignatureDoesNotMatch", "SignatureDoesNotMatch", http.StatusForbidden)
	// ErrOverLimit: the cluster refused a queue for its queue limits, or a
	// queue is full.
	ErrOverLimit = newCode("OverLimit", "OverLimit", http.StatusForbidden)
	// ErrResourceNotFound: a message move task or its source is unknown.
	ErrResourceNotFound = newCode("ResourceNotFoundException", "ResourceNotFoundException", http.StatusBadRequest)
	// ErrRequestThrottled: the caller (its access key) is at one of its
	// bounds of requests in flight (Limits), or the endpoint at its bound
	// of callers; the request did nothing and may be retried. SDKs take it
	// as a throttling error and retry with backoff.
	ErrRequestThrottled = newCode("RequestThrottled", "RequestThrottled", http.StatusBadRequest)
	// ErrServiceUnavailable: the cluster could not serve the request now.
	ErrServiceUnavailable = newCode("ServiceUnavailable", "ServiceUnavailable", http.StatusServiceUnavailable)
	// ErrInternalFailure: an unexpected failure.
	ErrInternalFailure = newCode("InternalFailure", "InternalFailure", http.StatusInternalServerError)

	// ErrInvalidLimits: a field of Limits is out of its range (a
	// configuration error of the server, not an answer of the API).
	ErrInvalidLimits = errors.New("sqs: invalid limits")
)

// Code is one SQS error code: its JSON type, its query-protocol code and
// its HTTP status.
type Code struct {
	// Type is the error's shape name, sent as __type.
	Type string
	// QueryCode is the code of the query protocol, sent in the
	// x-amzn-query-error header (SDKs report it as the error code).
	QueryCode string
	// Status is the HTTP status of the answer.
	Status int
}

func newCode(typ, query string, status int) *Code {
	return &Code{Type: typ, QueryCode: query, Status: status}
}

// Error returns the code's type name.
func (c *Code) Error() string { return c.Type }

// Error is one failed request or batch entry: a code and a message.
type Error struct {
	Code    *Code
	Message string
}

// Error returns the code and the message.
func (e *Error) Error() string { return e.Code.Type + ": " + e.Message }

// Unwrap returns the code, for errors.Is.
func (e *Error) Unwrap() error { return e.Code }

// sender reports whether the caller (not the server) is at fault.
func (e *Error) sender() bool { return e.Code.Status < 500 }

func fail(c *Code, format string, args ...any) *Error {
	return &Error{Code: c, Message: fmt.Sprintf(format, args...)}
}

// asError turns any error into an *Error, mapping unknown ones to
// InternalFailure.
func asError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: ErrInternalFailure, Message: err.Error()}
}
