package redact

import (
	"context"
	"fmt"
	"log/slog"
)

// Handler wraps a slog.Handler so that every record's message and
// attribute values pass through a policy before they are written: the
// last line of defence for logs, whatever a caller put in them.
type Handler struct {
	next   slog.Handler
	policy func() *Policy
}

// NewHandler redacts with policy() at each record; a nil policy is
// Default. A func rather than a Policy so that a daemon can swap in the
// policy of a reloaded configuration.
func NewHandler(next slog.Handler, policy func() *Policy) *Handler {
	if policy == nil {
		policy = Default
	}
	return &Handler{next: next, policy: policy}
}

// Enabled implements slog.Handler.
func (h *Handler) Enabled(ctx context.Context, l slog.Level) bool { return h.next.Enabled(ctx, l) }

// Handle implements slog.Handler.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	p := h.policy()
	out := slog.NewRecord(r.Time, r.Level, p.String(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(redactAttr(p, a))
		return true
	})
	return h.next.Handle(ctx, out)
}

// WithAttrs implements slog.Handler.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	p := h.policy()
	red := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		red[i] = redactAttr(p, a)
	}
	return &Handler{next: h.next.WithAttrs(red), policy: h.policy}
}

// WithGroup implements slog.Handler.
func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{next: h.next.WithGroup(name), policy: h.policy}
}

// redactAttr masks an attribute's value; everything but numbers, bools,
// times and durations is rendered to text first, since an error or a
// Stringer may hold a secret in its message.
func redactAttr(p *Policy, a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, p.String(v.String()))
	case slog.KindGroup:
		g := v.Group()
		red := make([]any, len(g))
		for i, ga := range g {
			red[i] = redactAttr(p, ga)
		}
		return slog.Group(a.Key, red...)
	case slog.KindAny:
		var s string
		switch x := v.Any().(type) {
		case nil:
			return a
		case error:
			s = x.Error()
		case fmt.Stringer:
			s = x.String()
		default:
			s = fmt.Sprint(x)
		}
		if red := p.String(s); red != s {
			return slog.String(a.Key, red)
		}
		return slog.Attr{Key: a.Key, Value: v}
	default:
		return slog.Attr{Key: a.Key, Value: v}
	}
}
