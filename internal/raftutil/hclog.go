package raftutil

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"strconv"

	"github.com/hashicorp/go-hclog"
)

// levelTrace is the slog level hclog's Trace maps to.
const levelTrace = slog.LevelDebug - 4

// NewHCLogger returns an hclog.Logger that writes to l, for the libraries
// that log through hclog (raft's transport here; raft.Config.Logger may
// use it too). Levels map to slog's (Trace to Debug-4); filtering is left
// to l's handler, so SetLevel has no effect. Named loggers add a "logger"
// attribute holding the dotted name.
func NewHCLogger(l *slog.Logger) hclog.Logger {
	if l == nil {
		l = slog.Default()
	}
	return &hcLogger{base: l, l: l}
}

// hcLogger adapts a *slog.Logger to hclog.Logger.
type hcLogger struct {
	base    *slog.Logger // without name and implied args
	l       *slog.Logger // base with name and implied args applied
	name    string
	implied []any
}

// toSlog maps an hclog level to a slog level.
func toSlog(level hclog.Level) slog.Level {
	switch level {
	case hclog.Trace:
		return levelTrace
	case hclog.Debug:
		return slog.LevelDebug
	case hclog.Warn:
		return slog.LevelWarn
	case hclog.Error:
		return slog.LevelError
	default:
		return slog.LevelInfo
	}
}

func (h *hcLogger) enabled(level slog.Level) bool {
	return h.l.Enabled(context.Background(), level)
}

// Log implements hclog.Logger.
func (h *hcLogger) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.Off || !h.enabled(toSlog(level)) {
		return // a line the handler drops costs no argument conversion
	}
	h.l.Log(context.Background(), toSlog(level), msg, convertArgs(args)...)
}

// convertArgs renders hclog's value wrappers (Fmt, Hex, Octal, Binary,
// Quote) the way hclog prints them. It copies args only when one is found.
func convertArgs(args []any) []any {
	out := args
	for i, a := range args {
		var v any
		switch a := a.(type) {
		case hclog.Format:
			if len(a) == 0 {
				continue
			}
			format, _ := a[0].(string)
			v = fmt.Sprintf(format, a[1:]...)
		case hclog.Hex:
			v = fmt.Sprintf("0x%x", int(a))
		case hclog.Octal:
			v = fmt.Sprintf("0%o", int(a))
		case hclog.Binary:
			v = fmt.Sprintf("0b%b", int(a))
		case hclog.Quote:
			v = strconv.Quote(string(a))
		default:
			continue
		}
		if &out[0] == &args[0] {
			out = append([]any(nil), args...)
		}
		out[i] = v
	}
	return out
}

// Trace implements hclog.Logger.
func (h *hcLogger) Trace(msg string, args ...any) { h.Log(hclog.Trace, msg, args...) }

// Debug implements hclog.Logger.
func (h *hcLogger) Debug(msg string, args ...any) { h.Log(hclog.Debug, msg, args...) }

// Info implements hclog.Logger.
func (h *hcLogger) Info(msg string, args ...any) { h.Log(hclog.Info, msg, args...) }

// Warn implements hclog.Logger.
func (h *hcLogger) Warn(msg string, args ...any) { h.Log(hclog.Warn, msg, args...) }

// Error implements hclog.Logger.
func (h *hcLogger) Error(msg string, args ...any) { h.Log(hclog.Error, msg, args...) }

// IsTrace implements hclog.Logger.
func (h *hcLogger) IsTrace() bool { return h.enabled(levelTrace) }

// IsDebug implements hclog.Logger.
func (h *hcLogger) IsDebug() bool { return h.enabled(slog.LevelDebug) }

// IsInfo implements hclog.Logger.
func (h *hcLogger) IsInfo() bool { return h.enabled(slog.LevelInfo) }

// IsWarn implements hclog.Logger.
func (h *hcLogger) IsWarn() bool { return h.enabled(slog.LevelWarn) }

// IsError implements hclog.Logger.
func (h *hcLogger) IsError() bool { return h.enabled(slog.LevelError) }

// ImpliedArgs implements hclog.Logger.
func (h *hcLogger) ImpliedArgs() []any { return h.implied }

// With implements hclog.Logger.
func (h *hcLogger) With(args ...any) hclog.Logger {
	implied := append(append([]any(nil), h.implied...), args...)
	return h.derive(h.name, implied)
}

// Name implements hclog.Logger.
func (h *hcLogger) Name() string { return h.name }

// Named implements hclog.Logger.
func (h *hcLogger) Named(name string) hclog.Logger {
	if h.name != "" {
		name = h.name + "." + name
	}
	return h.derive(name, h.implied)
}

// ResetNamed implements hclog.Logger.
func (h *hcLogger) ResetNamed(name string) hclog.Logger { return h.derive(name, h.implied) }

// SetLevel implements hclog.Logger. It does nothing: the slog handler
// decides what is written.
func (h *hcLogger) SetLevel(hclog.Level) {}

// GetLevel implements hclog.Logger, reporting the lowest level the slog
// handler accepts.
func (h *hcLogger) GetLevel() hclog.Level {
	for _, lv := range []hclog.Level{hclog.Trace, hclog.Debug, hclog.Info, hclog.Warn, hclog.Error} {
		if h.enabled(toSlog(lv)) {
			return lv
		}
	}
	return hclog.Off
}

// StandardLogger implements hclog.Logger; lines are written at info level.
func (h *hcLogger) StandardLogger(*hclog.StandardLoggerOptions) *log.Logger {
	return slog.NewLogLogger(h.l.Handler(), slog.LevelInfo)
}

// StandardWriter implements hclog.Logger; lines are written at info level.
func (h *hcLogger) StandardWriter(opts *hclog.StandardLoggerOptions) io.Writer {
	return h.StandardLogger(opts).Writer()
}

// derive returns a logger with the given name and implied args over base.
func (h *hcLogger) derive(name string, implied []any) hclog.Logger {
	l := h.base
	if name != "" {
		l = l.With("logger", name)
	}
	if len(implied) > 0 {
		l = l.With(convertArgs(implied)...)
	}
	return &hcLogger{base: h.base, l: l, name: name, implied: implied}
}
