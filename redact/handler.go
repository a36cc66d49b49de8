package redact

import (
	"context"
	"fmt"
	"log/slog"
)

// NewHandler returns a slog.Handler that masks r's secrets in each record
// before passing it to h: the message, attribute keys, string values,
// errors (as their text), values inside groups, and attributes added with
// WithAttrs. A value of another type (a Stringer, []byte, a struct) keeps
// its type unless its printed form holds a secret, in which case it becomes
// that printed form, masked. When r masks nothing, NewHandler returns h.
func NewHandler(h slog.Handler, r *Redactor) slog.Handler {
	if r == nil {
		return h
	}
	return &handler{h: h, r: r}
}

type handler struct {
	h slog.Handler
	r *Redactor
}

func (h *handler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.h.Enabled(ctx, level)
}

func (h *handler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.r.String(rec.Message), rec.PC)
	attrs := make([]slog.Attr, 0, rec.NumAttrs())
	rec.Attrs(func(a slog.Attr) bool {
		attrs = append(attrs, h.attr(a))
		return true
	})
	out.AddAttrs(attrs...)
	return h.h.Handle(ctx, out)
}

func (h *handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	masked := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		masked[i] = h.attr(a)
	}
	return &handler{h: h.h.WithAttrs(masked), r: h.r}
}

func (h *handler) WithGroup(name string) slog.Handler {
	return &handler{h: h.h.WithGroup(h.r.String(name)), r: h.r}
}

// attr returns a with its key and value masked.
func (h *handler) attr(a slog.Attr) slog.Attr {
	a.Key = h.r.String(a.Key)
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		a.Value = slog.StringValue(h.r.String(v.String()))
	case slog.KindGroup:
		group := v.Group()
		masked := make([]slog.Attr, len(group))
		for i, g := range group {
			masked[i] = h.attr(g)
		}
		a.Value = slog.GroupValue(masked...)
	case slog.KindAny:
		a.Value = h.any(v)
	default:
		a.Value = v // numbers, bools, times, durations: no text to mask
	}
	return a
}

// any masks a value of KindAny.
func (h *handler) any(v slog.Value) slog.Value {
	switch x := v.Any().(type) {
	case nil:
		return v
	case error:
		// Both built-in handlers print an error as its text.
		return slog.StringValue(h.r.String(x.Error()))
	}
	// Other values keep their type (the JSON handler marshals them) unless
	// their printed form holds a secret.
	var text string
	switch x := v.Any().(type) {
	case fmt.Stringer:
		text = x.String()
	case []byte:
		text = string(x)
	default:
		text = fmt.Sprintf("%+v", x)
	}
	if masked := h.r.String(text); masked != text {
		return slog.StringValue(masked)
	}
	return v
}
