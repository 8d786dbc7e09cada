// Package sqs serves an SQS-compatible API in front of a Ferry cluster, so
// that programs written against Amazon SQS (its SDKs and CLI) work with
// Ferry by changing only their endpoint and credentials.
//
// The server speaks the SQS JSON protocol (POST with an X-Amz-Target of
// "AmazonSQS.<Action>" and content type application/x-amz-json-1.0). Every
// action runs through the Go client (package client) against the cluster,
// so any node serves any queue and a receipt handle issued by one node is
// accepted by every other: a handle encodes the Ferry receipt (queue,
// partition, sequence number, delivery attempt), and the attempt fences a
// stale handle the way the cluster fences a stale receipt.
//
// SQS attributes Ferry's queue configuration has no place for (DelaySeconds,
// ReceiveMessageWaitTimeSeconds, the dead-letter target of a RedrivePolicy,
// ContentBasedDeduplication, timestamps, tags) are kept in the reserved
// Ferry queue MetaQueue, one record per SQS queue, so every node sees them.
//
// The query protocol (form-encoded Action=... requests answered in XML)
// is served on the same port for older clients.
//
// Signature Version 4 headers are parsed (a malformed Authorization header
// is refused) and, when Config.Credentials is set (ferryd sets
// TokenCredentials whenever it has client tokens), verified; the request
// then runs with the permissions of the access key's token.
// docs/sqs.md lists what is supported.
package sqs
