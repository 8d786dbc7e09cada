package raftutil

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestHCLogger_WritesToSlog(t *testing.T) {
	var buf bytes.Buffer
	base := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	l := NewHCLogger(base).Named("raft").Named("net").With("group", "p1")

	l.Debug("hidden")
	l.Info("configured", "servers", hclog.Fmt("%d voters", 3), "mask", hclog.Hex(255), "id", hclog.Quote("n 1"))
	l.Error("failed", "err", "boom")
	out := buf.String()
	for _, want := range []string{
		`msg=configured`, `logger=raft.net`, `group=p1`, `servers="3 voters"`, `mask=0xff`, `id="\"n 1\""`,
		`level=ERROR msg=failed`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, "hidden") {
		t.Errorf("debug line written below the handler's level:\n%s", out)
	}
	if l.IsDebug() || !l.IsInfo() || l.GetLevel() != hclog.Info {
		t.Errorf("levels: IsDebug %v IsInfo %v GetLevel %v, want false true info", l.IsDebug(), l.IsInfo(), l.GetLevel())
	}
	if l.Name() != "raft.net" || l.ResetNamed("x").Name() != "x" {
		t.Errorf("names: %q, %q", l.Name(), l.ResetNamed("x").Name())
	}
	l.StandardLogger(nil).Print("from the log package")
	if !strings.Contains(buf.String(), "from the log package") {
		t.Errorf("StandardLogger output missing:\n%s", buf.String())
	}
}
