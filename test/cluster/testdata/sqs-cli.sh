#!/usr/bin/env bash
# Drives the AWS CLI against Ferry's SQS API. Run by TestSQSWithCLI with:
#   AWS_CLI   the aws executable
#   ENDPOINT  the SQS endpoint (https://ip:port)
#   QUEUE     a fresh queue name
#   AWS_CA_BUNDLE, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, HOME set by the test
set -euo pipefail

sqs() { "$AWS_CLI" --endpoint-url "$ENDPOINT" --region us-east-1 --output text sqs "$@"; }
fail() { echo "FAIL: $*" >&2; exit 1; }
want() { # want WHAT GOT EXPECTED
  [[ "$2" == "$3" ]] || fail "$1: got '$2', want '$3'"
}

url=$(sqs create-queue --queue-name "$QUEUE" --attributes VisibilityTimeout=40 --query QueueUrl)
[[ "$url" == */"$QUEUE" ]] || fail "create-queue: QueueUrl $url does not end in /$QUEUE"
want "repeated create-queue" "$(sqs create-queue --queue-name "$QUEUE" --attributes VisibilityTimeout=40 --query QueueUrl)" "$url"
want "get-queue-url" "$(sqs get-queue-url --queue-name "$QUEUE" --query QueueUrl)" "$url"
want "list-queues" "$(sqs list-queues --queue-name-prefix "$QUEUE" --query 'QueueUrls[0]')" "$url"
want "VisibilityTimeout" "$(sqs get-queue-attributes --queue-url "$url" --attribute-names VisibilityTimeout --query Attributes.VisibilityTimeout)" "40"

md5=$(sqs send-message --queue-url "$url" --message-body hello \
  --message-attributes '{"colour":{"DataType":"String","StringValue":"blue"}}' --query MD5OfMessageBody)
want "MD5OfMessageBody" "$md5" "5d41402abc4b2a76b9719d911017c592"
want "send-message-batch" "$(sqs send-message-batch --queue-url "$url" \
  --entries Id=a,MessageBody=one Id=b,MessageBody=two --query 'length(Successful)')" "2"
want "ApproximateNumberOfMessages" "$(sqs get-queue-attributes --queue-url "$url" \
  --attribute-names ApproximateNumberOfMessages --query Attributes.ApproximateNumberOfMessages)" "3"

# Receive all three (a receive may answer fewer than asked).
declare -A handles
for _ in 1 2 3 4 5; do
  while IFS=$'\t' read -r body handle; do
    [[ -n "$body" && "$body" != None ]] && handles[$body]=$handle
  done < <(sqs receive-message --queue-url "$url" --max-number-of-messages 10 --wait-time-seconds 5 \
    --query 'Messages[].[Body,ReceiptHandle]')
  (( ${#handles[@]} == 3 )) && break
done
want "received bodies" "$(printf '%s\n' "${!handles[@]}" | sort | tr '\n' ' ')" "hello one two "

colour=$(sqs receive-message --queue-url "$url" --max-number-of-messages 1 --query 'Messages[0].Body' || true)
want "receive while all are in flight" "$colour" "None"

# Visibility 0 makes "hello" visible again at once, with its attribute.
sqs change-message-visibility --queue-url "$url" --receipt-handle "${handles[hello]}" --visibility-timeout 0
again=$(sqs receive-message --queue-url "$url" --wait-time-seconds 5 --message-attribute-names All \
  --attribute-names ApproximateReceiveCount \
  --query 'Messages[0].[Body,MessageAttributes.colour.StringValue,Attributes.ApproximateReceiveCount,ReceiptHandle]')
IFS=$'\t' read -r body colour count handle <<<"$again"
want "received again" "$body $colour $count" "hello blue 2"

# The old handle is stale; the new one deletes.
if out=$(sqs delete-message --queue-url "$url" --receipt-handle "${handles[hello]}" 2>&1); then
  fail "delete-message with a stale handle succeeded"
fi
[[ "$out" == *ReceiptHandleIsInvalid* ]] || fail "stale handle: $out"
sqs delete-message --queue-url "$url" --receipt-handle "$handle"
want "delete-message-batch" "$(sqs delete-message-batch --queue-url "$url" \
  --entries "Id=x,ReceiptHandle=${handles[one]}" "Id=y,ReceiptHandle=${handles[two]}" --query 'length(Successful)')" "2"

sqs set-queue-attributes --queue-url "$url" --attributes DelaySeconds=2
want "DelaySeconds" "$(sqs get-queue-attributes --queue-url "$url" --attribute-names DelaySeconds --query Attributes.DelaySeconds)" "2"
sqs send-message --queue-url "$url" --message-body later >/dev/null
sqs purge-queue --queue-url "$url"
sqs delete-queue --queue-url "$url"
if out=$(sqs get-queue-url --queue-name "$QUEUE" 2>&1); then
  fail "get-queue-url after delete-queue succeeded: $out"
fi
[[ "$out" == *NonExistentQueue* || "$out" == *QueueDoesNotExist* ]] || fail "deleted queue: $out"
echo "PASS"
