package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestCLI_Priority sends with --priority and reads the priority back
// from peek, recv, msg find and dlq ls, in tables and in --json; a
// priority out of range is refused before anything is sent.
func TestCLI_Priority(t *testing.T) {
	nd := startNode(t)
	addr := nd.ClientAddr()
	cliJSON(t, addr, "queue", "create", "jobs", "--max-receives", "1") // a nack dead-letters
	cliJSON(t, addr, "send", "jobs", "--id", "routine", "r")
	cliJSON(t, addr, "send", "jobs", "--id", "urgent", "--priority", "9", "u")

	out, err := runCLI(addr, "send", "jobs", "--priority", "10", "x")
	if err == nil || !strings.Contains(err.Error(), "--priority 10") {
		t.Fatalf("--priority 10: %v (printed %s)", err, out)
	}

	peeked := cliJSON(t, addr, "peek", "jobs", "--max", "5").([]any)
	if len(peeked) != 2 || prioOf(peeked[0]) != 0 || prioOf(peeked[1]) != 9 {
		t.Fatalf("peek --json %v", peeked)
	}
	table, err := runCLI(addr, "peek", "jobs")
	if err != nil || !bytes.Contains(table, []byte("PRIO")) {
		t.Fatalf("peek table (%v):\n%s", err, table)
	}

	// The urgent message is received first, though sent second.
	got := cliJSON(t, addr, "recv", "jobs", "--max", "1").([]any)
	if len(got) != 1 || got[0].(map[string]any)["id"] != "urgent" || prioOf(got[0]) != 9 {
		t.Fatalf("recv --json %v", got)
	}
	found := cliJSON(t, addr, "msg", "find", "jobs", "urgent").([]any)
	if len(found) != 1 || prioOf(found[0]) != 9 {
		t.Fatalf("msg find --json %v", found)
	}
	if table, err := runCLI(addr, "msg", "find", "jobs", "urgent"); err != nil || !bytes.Contains(table, []byte("PRIO")) {
		t.Fatalf("msg find table (%v):\n%s", err, table)
	}
	receipt := got[0].(map[string]any)["receipt"].(string)
	if _, err := runCLI(addr, "nack", receipt, "--reason", "no"); err != nil {
		t.Fatal(err)
	}
	letters := cliJSON(t, addr, "dlq", "ls", "jobs").([]any)
	if len(letters) != 1 || prioOf(letters[0]) != 9 {
		t.Fatalf("dlq ls --json %v", letters)
	}
}

// prioOf returns the priority field of a JSON object, -1 if absent.
func prioOf(v any) int {
	p, ok := v.(map[string]any)["priority"].(float64)
	if !ok {
		return -1
	}
	return int(p)
}
