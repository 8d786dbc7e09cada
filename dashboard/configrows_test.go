package dashboard

import (
	"testing"
	"time"

	"github.com/ferrymq/ferry/client"
	"github.com/ferrymq/ferry/wire"
)

// TestConfigRows_EverySettingShown: the queue page lists every field of the
// config, and a 0 that means "no limit" or "off" says so.
func TestConfigRows_EverySettingShown(t *testing.T) {
	rows := configRows(client.QueueConfig{Partitions: 2, Replicas: 3, VisibilityTimeout: 90 * time.Second, MaxReceives: 5})
	if len(rows) != len(wire.ConfigFieldList()) {
		t.Fatalf("%d rows for %d fields: %v", len(rows), len(wire.ConfigFieldList()), rows)
	}
	got := map[string]string{}
	for _, r := range rows {
		got[r[0]] = r[1]
	}
	for k, want := range map[string]string{"partitions": "2", "visibility timeout": "1m30s", "max receives": "5",
		"max depth": "no limit", "dedup window": "off", "retention": "keep until acked", "max message bytes": "0"} {
		if got[k] != want {
			t.Errorf("%s: %q, want %q (rows %v)", k, got[k], want, rows)
		}
	}
}
