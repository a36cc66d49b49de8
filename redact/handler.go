package redact

import (
	"context"
	"encoding"
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"sort"
	"strconv"
	"strings"
)

// NewHandler returns a slog.Handler that masks r's secrets in each record
// before passing it to h: the message, attribute keys, string values,
// errors (as their text), values inside groups, and attributes added with
// WithAttrs. A value of another type (a Stringer, a []byte or named byte
// slice such as json.RawMessage, a struct, a map, a pointer) keeps its type
// unless a secret shows in its data or in any form a built-in handler could
// print it in; then it becomes a masked string of its data (see any), so no
// encoding of the secret that the handler would have chosen (base64 for
// bytes in JSON, decimal bytes in %+v) reaches the output. Numbers, bools,
// times and durations pass as they are. When r masks nothing, NewHandler
// returns h.
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
//
// The built-in handlers print such a value in ways that hide a secret from
// a search of one printed form: the JSON handler marshals it (a []byte as
// base64, a json.RawMessage verbatim, through pointers), the text handler
// uses MarshalText or %+v (a []byte field as decimal bytes, a nested
// pointer as an address), and a custom handler may do either. So the value
// is searched in its raw data (every string and byte slice in it, through
// pointers, interfaces, maps and unexported fields, without calling its
// methods) and in what its methods print (%+v, MarshalText, JSON). If a
// secret shows in any of them, the value is replaced by its raw data as a
// masked string; otherwise it keeps its type.
func (h *handler) any(v slog.Value) slog.Value {
	x := v.Any()
	if x == nil {
		return v
	}
	if err, ok := x.(error); ok {
		// Both built-in handlers print an error as its text (the JSON one
		// marshals an error that is a json.Marshaler: the string is safer).
		return slog.StringValue(h.r.String(err.Error()))
	}
	rv := reflect.ValueOf(x)
	switch rv.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr,
		reflect.Float32, reflect.Float64, reflect.Complex64, reflect.Complex128:
		if rv.Type().NumMethod() == 0 {
			return v // a number without methods: no text to mask
		}
	}
	raw := rawText(rv)
	if !h.r.holds(raw) && !h.r.holds(fmt.Sprintf("%+v", x)) && !h.r.holds(textOf(x)) && !h.r.holds(jsonOf(x)) {
		return v
	}
	return slog.StringValue(h.r.String(raw))
}

// textOf returns what MarshalText makes of x, or its error's text; "" when
// x is not an encoding.TextMarshaler.
func textOf(x any) (s string) {
	tm, ok := x.(encoding.TextMarshaler)
	if !ok {
		return ""
	}
	defer func() {
		if p := recover(); p != nil {
			s = fmt.Sprint(p)
		}
	}()
	b, err := tm.MarshalText()
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// jsonOf returns x as the JSON handler writes it (no HTML escaping), or its
// error's text.
func jsonOf(x any) (s string) {
	defer func() {
		if p := recover(); p != nil {
			s = fmt.Sprint(p)
		}
	}()
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(x); err != nil {
		return err.Error()
	}
	return b.String()
}

// rawText returns v's data in the shape of %+v, following every pointer,
// with each string and each byte slice or array written as its bytes (never
// base64 or decimal), so that a secret anywhere in v shows whole. It calls
// none of v's methods; a pointer, map or slice met again is written "…"
// (its data was written where it was first met), so cycles end.
func rawText(v reflect.Value) string {
	w := rawWriter{b: &strings.Builder{}, seen: map[rawVisit]bool{}}
	w.value(v)
	return w.b.String()
}

type rawVisit struct {
	p uintptr
	t reflect.Type
	n int
}

type rawWriter struct {
	b    *strings.Builder
	seen map[rawVisit]bool
}

// first reports whether the pointer, map or slice v is met the first time.
func (w *rawWriter) first(v reflect.Value) bool {
	k := rawVisit{v.Pointer(), v.Type(), 0}
	if v.Kind() == reflect.Slice {
		k.n = v.Len()
	}
	if w.seen[k] {
		w.b.WriteString("…")
		return false
	}
	w.seen[k] = true
	return true
}

func (w *rawWriter) value(v reflect.Value) {
	switch v.Kind() {
	case reflect.Invalid:
		w.b.WriteString("<nil>")
	case reflect.String:
		w.b.WriteString(v.String())
	case reflect.Bool:
		w.b.WriteString(strconv.FormatBool(v.Bool()))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		w.b.WriteString(strconv.FormatInt(v.Int(), 10))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		w.b.WriteString(strconv.FormatUint(v.Uint(), 10))
	case reflect.Float32, reflect.Float64:
		w.b.WriteString(strconv.FormatFloat(v.Float(), 'g', -1, v.Type().Bits()))
	case reflect.Complex64, reflect.Complex128:
		w.b.WriteString(strconv.FormatComplex(v.Complex(), 'g', -1, v.Type().Bits()))
	case reflect.Pointer:
		if v.IsNil() {
			w.b.WriteString("<nil>")
		} else if w.first(v) {
			w.b.WriteString("&")
			w.value(v.Elem())
		}
	case reflect.Interface:
		if v.IsNil() {
			w.b.WriteString("<nil>")
		} else {
			w.value(v.Elem())
		}
	case reflect.Struct:
		w.b.WriteString("{")
		for i := range v.NumField() {
			if i > 0 {
				w.b.WriteString(" ")
			}
			w.b.WriteString(v.Type().Field(i).Name)
			w.b.WriteString(":")
			w.value(v.Field(i))
		}
		w.b.WriteString("}")
	case reflect.Map:
		if v.IsNil() {
			w.b.WriteString("map[]")
			return
		}
		if !w.first(v) {
			return
		}
		// Entries in the order of their text, as fmt sorts keys.
		var entries []string
		outer := w.b
		for it := v.MapRange(); it.Next(); {
			w.b = &strings.Builder{}
			w.value(it.Key())
			w.b.WriteString(":")
			w.value(it.Value())
			entries = append(entries, w.b.String())
		}
		w.b = outer
		sort.Strings(entries)
		w.b.WriteString("map[" + strings.Join(entries, " ") + "]")
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			w.b.Write(v.Bytes()) // the bytes as text: no encoding hides a secret
			return
		}
		if v.Len() > 0 && !w.first(v) {
			return
		}
		w.elems(v)
	case reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			for i := range v.Len() {
				w.b.WriteByte(byte(v.Index(i).Uint()))
			}
			return
		}
		w.elems(v)
	default: // chan, func, unsafe pointer: no data of their own to show
		w.b.WriteString(v.Type().String())
	}
}

// elems writes a slice's or an array's elements as [a b c].
func (w *rawWriter) elems(v reflect.Value) {
	w.b.WriteString("[")
	for i := range v.Len() {
		if i > 0 {
			w.b.WriteString(" ")
		}
		w.value(v.Index(i))
	}
	w.b.WriteString("]")
}
