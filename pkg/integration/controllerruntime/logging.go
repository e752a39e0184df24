package controllerruntime

import (
	"context"
	"log/slog"

	"github.com/go-logr/logr"
)

// Logging. The Runtime logs through the manager's logr.Logger (Options.Logger), with
// controller-runtime's key style: lowerCamel keys, each once per line. logr has no
// warning level, so a warning is logged at V(0), like info, with the key "severity"
// set to "warning" (a key of its own: zap, the manager's usual sink, writes "level"
// itself); errors go to Error. The packages under the Runtime log through log/slog;
// their slog.LevelWarn records reach the logr sink the same way, so that
//
//	kubectl logs ... | grep '"severity":"warning"'
//
// finds every warning of the Runtime and the election.

// severityKey and severityWarning mark a warning in a logr line.
const (
	severityKey     = "severity"
	severityWarning = "warning"
)

// toSlog returns a log/slog logger writing to l, warnings marked as above.
func toSlog(l logr.Logger) *slog.Logger {
	return slog.New(warnHandler{logr.ToSlogHandler(l)})
}

// warnHandler marks slog warnings (LevelWarn up to LevelError) with severity=warning;
// logr.ToSlogHandler would log them as plain info.
type warnHandler struct{ slog.Handler }

func (h warnHandler) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn && r.Level < slog.LevelError {
		r = r.Clone()
		r.AddAttrs(slog.String(severityKey, severityWarning))
	}
	return h.Handler.Handle(ctx, r)
}

func (h warnHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return warnHandler{h.Handler.WithAttrs(as)}
}

func (h warnHandler) WithGroup(name string) slog.Handler {
	return warnHandler{h.Handler.WithGroup(name)}
}

func warn(l logr.Logger, msg string, keysAndValues ...any) {
	l.Info(msg, append(keysAndValues, severityKey, severityWarning)...)
}
