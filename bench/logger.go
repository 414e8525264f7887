package bench

import (
	"context"
	"log/slog"
)

// runnerLogger is the step's schedule runner's logger: errors only. The
// runner warns when a drain runs out and it cancels in-flight runs, which
// for the daemon is news; for bench it is the planned end of an
// early-stopped or interrupted step, reported as cancelled_requests, and
// a warning per step of a capacity search would read as trouble.
func runnerLogger(l *slog.Logger) *slog.Logger {
	return slog.New(errorsOnly{l.Handler()})
}

type errorsOnly struct{ slog.Handler }

func (h errorsOnly) Enabled(ctx context.Context, level slog.Level) bool {
	return level >= slog.LevelError && h.Handler.Enabled(ctx, level)
}

func (h errorsOnly) WithAttrs(as []slog.Attr) slog.Handler {
	return errorsOnly{h.Handler.WithAttrs(as)}
}

func (h errorsOnly) WithGroup(name string) slog.Handler { return errorsOnly{h.Handler.WithGroup(name)} }
