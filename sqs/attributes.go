package sqs

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/ferrymq/ferry/client"
)

// SQS queue attribute names.
const (
	attrVisibilityTimeout      = "VisibilityTimeout"
	attrMessageRetentionPeriod = "MessageRetentionPeriod"
	attrDelaySeconds           = "DelaySeconds"
	attrMaximumMessageSize     = "MaximumMessageSize"
	attrReceiveWaitTime        = "ReceiveMessageWaitTimeSeconds"
	attrRedrivePolicy          = "RedrivePolicy"
	attrFifoQueue              = "FifoQueue"
	attrContentBasedDedup      = "ContentBasedDeduplication"
	// attrFairGroups is Ferry's own attribute: the queue's fair_groups
	// setting, "true" or "false". On a standard queue it also makes
	// MessageGroupId the message's group.
	attrFairGroups = "FairGroups"
)

// Defaults and ranges of the SQS queue attributes, in seconds or bytes.
const (
	defaultVisibilitySeconds = 30
	defaultRetentionSeconds  = 345600
	defaultMaxMessageSize    = MaxMessageBytes
	maxVisibilitySeconds     = 43200
	maxDelaySeconds          = 900
	maxWaitSeconds           = 20
	minRetentionSeconds      = 60
	maxRetentionSeconds      = 1209600
	minMaxMessageSize        = 1024
	maxReceiveCountMax       = 1000
)

// storedAttrs are queue attributes kept only in the queue's record: some
// change behaviour here (delay, wait, size, deduplication), the others are
// accepted and reported back but have no effect in Ferry.
var storedAttrs = map[string]bool{
	attrDelaySeconds: true, attrMaximumMessageSize: true, attrReceiveWaitTime: true,
	attrRedrivePolicy: true, attrContentBasedDedup: true,
	"Policy": true, "KmsMasterKeyId": true, "KmsDataKeyReusePeriodSeconds": true,
	"SqsManagedSseEnabled": true, "RedriveAllowPolicy": true,
	"DeduplicationScope": true, "FifoThroughputLimit": true,
}

// redrivePolicy is the JSON of the RedrivePolicy attribute.
type redrivePolicy struct {
	DeadLetterTargetArn string      `json:"deadLetterTargetArn"`
	MaxReceiveCount     json.Number `json:"maxReceiveCount"`
}

// queueView is a queue as SQS sees it: Ferry's config and the record.
type queueView struct {
	name string
	cfg  client.QueueConfig
	meta *queueMeta // never nil: an empty record for queues without one
}

func (v queueView) fifo() bool { return strings.HasSuffix(v.name, ".fifo") }

func (v queueView) intAttr(name string, def int) int {
	if s, ok := v.meta.Attrs[name]; ok {
		if n, err := strconv.Atoi(s); err == nil {
			return n
		}
	}
	return def
}

func (v queueView) delay() time.Duration {
	return time.Duration(v.intAttr(attrDelaySeconds, 0)) * time.Second
}

func (v queueView) waitTime() int { return v.intAttr(attrReceiveWaitTime, 0) }

func (v queueView) maxMessageSize() int {
	return v.intAttr(attrMaximumMessageSize, defaultMaxMessageSize)
}

func (v queueView) contentDedup() bool { return v.meta.Attrs[attrContentBasedDedup] == "true" }

// fairGroups says whether the queue delivers fairly across groups.
func (v queueView) fairGroups() bool { return v.cfg.FairGroups != 0 }

// redrive returns the queue's RedrivePolicy as SQS reports it: the stored
// one, or for a queue with a receive limit and no record, one that names
// the queue itself (Ferry keeps dead letters inside the queue).
func (v queueView) redrive(arn string) string {
	if p, ok := v.meta.Attrs[attrRedrivePolicy]; ok {
		return p
	}
	if v.cfg.MaxReceives > 0 {
		b, _ := json.Marshal(map[string]any{"deadLetterTargetArn": arn, "maxReceiveCount": v.cfg.MaxReceives})
		return string(b)
	}
	return ""
}

// attributes returns every attribute of the queue but the counts.
func (v queueView) attributes(arn string) map[string]string {
	out := map[string]string{
		"QueueArn":                 arn,
		attrVisibilityTimeout:      strconv.Itoa(int(v.cfg.VisibilityTimeout / time.Second)),
		attrMessageRetentionPeriod: strconv.Itoa(int(v.cfg.Retention / time.Second)),
		attrDelaySeconds:           strconv.Itoa(v.intAttr(attrDelaySeconds, 0)),
		attrMaximumMessageSize:     strconv.Itoa(v.maxMessageSize()),
		attrReceiveWaitTime:        strconv.Itoa(v.waitTime()),
		"CreatedTimestamp":         strconv.FormatInt(v.meta.Created, 10),
		"LastModifiedTimestamp":    strconv.FormatInt(v.meta.Modified, 10),
		"SqsManagedSseEnabled":     "false",
		attrFairGroups:             strconv.FormatBool(v.fairGroups()),
	}
	for k, val := range v.meta.Attrs {
		if k != attrRedrivePolicy && k != attrContentBasedDedup {
			out[k] = val
		}
	}
	if p := v.redrive(arn); p != "" {
		out[attrRedrivePolicy] = p
	}
	if v.fifo() {
		out[attrFifoQueue] = "true"
		out[attrContentBasedDedup] = strconv.FormatBool(v.contentDedup())
	}
	return out
}

// attrChange is a validated set of attribute changes: Ferry settings and
// record entries ("" deletes one).
type attrChange struct {
	settings []client.QueueSetting
	stored   map[string]string
}

// parseAttributes checks attributes for CreateQueue (create) or
// SetQueueAttributes and splits them into Ferry settings and record
// entries.
func parseAttributes(name string, attrs map[string]string, create bool) (attrChange, error) {
	ch := attrChange{stored: map[string]string{}}
	fifo := strings.HasSuffix(name, ".fifo")
	for k, val := range attrs {
		if err := ch.add(k, val, fifo, create); err != nil {
			return ch, err
		}
	}
	if create && fifo != (attrs[attrFifoQueue] == "true") {
		return ch, fail(ErrInvalidParameterValue, "a queue name ends in .fifo exactly when its FifoQueue attribute is true")
	}
	return ch, nil
}

func seconds(k, val string, lo, hi int) (int, error) {
	n, err := strconv.Atoi(val)
	if err != nil || n < lo || n > hi {
		return 0, fail(ErrInvalidAttributeValue, "invalid value for the parameter %s: %q (want %d..%d)", k, truncate(val, 32), lo, hi)
	}
	return n, nil
}

func (ch *attrChange) add(k, val string, fifo, create bool) error {
	switch k {
	case attrVisibilityTimeout:
		n, err := seconds(k, val, 0, maxVisibilitySeconds)
		if err != nil {
			return err
		}
		ch.settings = append(ch.settings, client.VisibilityTimeout(time.Duration(n)*time.Second))
	case attrMessageRetentionPeriod:
		n, err := seconds(k, val, minRetentionSeconds, maxRetentionSeconds)
		if err != nil {
			return err
		}
		ch.settings = append(ch.settings, client.Retention(time.Duration(n)*time.Second))
	case attrDelaySeconds:
		_, err := seconds(k, val, 0, maxDelaySeconds)
		ch.stored[k] = val
		return err
	case attrReceiveWaitTime:
		_, err := seconds(k, val, 0, maxWaitSeconds)
		ch.stored[k] = val
		return err
	case attrMaximumMessageSize:
		n, err := seconds(k, val, minMaxMessageSize, MaxMessageBytes)
		if err != nil {
			return err
		}
		ch.stored[k] = val
		ch.settings = append(ch.settings, client.MaxMessageBytes(ferryMessageBytes(n)))
	case attrRedrivePolicy:
		return ch.addRedrive(val)
	case attrFifoQueue:
		if !create {
			return fail(ErrInvalidAttributeName, "FifoQueue can only be set when the queue is created")
		}
		if val != "true" && val != "false" {
			return fail(ErrInvalidAttributeValue, "FifoQueue must be true or false")
		}
	case attrFairGroups:
		if val != "true" && val != "false" {
			return fail(ErrInvalidAttributeValue, "FairGroups must be true or false")
		}
		ch.settings = append(ch.settings, client.FairGroups(val == "true"))
	case attrContentBasedDedup:
		if !fifo {
			return fail(ErrInvalidAttributeName, "ContentBasedDeduplication applies to FIFO queues only")
		}
		if val != "true" && val != "false" {
			return fail(ErrInvalidAttributeValue, "ContentBasedDeduplication must be true or false")
		}
		ch.stored[k] = val
	default:
		if !storedAttrs[k] {
			return fail(ErrInvalidAttributeName, "unknown attribute %s", truncate(k, 64))
		}
		if len(val) > 20<<10 {
			return fail(ErrInvalidAttributeValue, "attribute %s longer than 20 KiB", k)
		}
		ch.stored[k] = val
	}
	return nil
}

func (ch *attrChange) addRedrive(val string) error {
	if val == "" {
		ch.stored[attrRedrivePolicy] = ""
		ch.settings = append(ch.settings, client.MaxReceives(0))
		return nil
	}
	var p redrivePolicy
	if err := json.Unmarshal([]byte(val), &p); err != nil {
		return fail(ErrInvalidAttributeValue, "RedrivePolicy is not JSON: %v", err)
	}
	n, err := strconv.Atoi(p.MaxReceiveCount.String())
	if err != nil || n < 1 || n > maxReceiveCountMax {
		return fail(ErrInvalidAttributeValue, "RedrivePolicy maxReceiveCount %q (want 1..%d)", truncate(p.MaxReceiveCount.String(), 16), maxReceiveCountMax)
	}
	if p.DeadLetterTargetArn == "" {
		return fail(ErrInvalidAttributeValue, "RedrivePolicy lacks deadLetterTargetArn")
	}
	ch.stored[attrRedrivePolicy] = val
	ch.settings = append(ch.settings, client.MaxReceives(n))
	return nil
}

// ferryMessageBytes is the Ferry max_message_bytes that holds an SQS
// message of n bytes with its attributes as headers (binary values take
// base64 there, and each attribute may add a type header).
func ferryMessageBytes(n int) int { return 2*n + 16<<10 }

// createSettings are the Ferry settings of a queue created through SQS,
// before the request's attributes: SQS defaults, no retry backoff (a
// message whose visibility timeout ends is visible again at once), and no
// receive limit without a RedrivePolicy.
func createSettings() []client.QueueSetting {
	return []client.QueueSetting{
		client.VisibilityTimeout(defaultVisibilitySeconds * time.Second),
		client.Retention(defaultRetentionSeconds * time.Second),
		client.MaxMessageBytes(ferryMessageBytes(defaultMaxMessageSize)),
		client.MaxReceives(0),
		client.BackoffBase(0), client.BackoffMax(0),
	}
}
