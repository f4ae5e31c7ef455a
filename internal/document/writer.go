package document

import (
	"strconv"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// docWriter appends the members of the document's top-level object.
type docWriter struct {
	b []byte
	n int // members written so far
}

func (w *docWriter) key(name string) {
	if w.n > 0 {
		w.b = append(w.b, ',')
	}
	w.n++
	w.b = append(w.b, '"')
	w.b = append(w.b, name...)
	w.b = append(w.b, '"', ':')
}

func (w *docWriter) str(name, val string) {
	w.key(name)
	w.b = AppendString(w.b, val)
}

func (w *docWriter) int(name string, val int64) {
	w.key(name)
	w.b = strconv.AppendInt(w.b, val, 10)
}

func (w *docWriter) bool(name string, val bool) {
	w.key(name)
	w.b = strconv.AppendBool(w.b, val)
}

// timestamp copies a Kubernetes timestamp (RFC 3339 text) when it is set.
func (w *docWriter) timestamp(name string, ts gjson.Result) {
	if ts.Type == gjson.String && ts.Str != "" {
		w.str(name, ts.Str)
	}
}

// list starts an array member; it is removed again if nothing is added, so empty lists are absent
// rather than [], which OpenSearch treats the same and costs bytes.
func (w *docWriter) list(name string) docList {
	l := docList{w: w, mark: len(w.b), prevN: w.n}
	w.key(name)
	w.b = append(w.b, '[')
	return l
}

type docList struct {
	w           *docWriter
	mark, prevN int
	n           int
}

func (l *docList) add(s string) {
	if l.n > 0 {
		l.w.b = append(l.w.b, ',')
	}
	l.n++
	l.w.b = AppendString(l.w.b, s)
}

func (l *docList) addPair(a string, sep byte, b string) {
	if l.n > 0 {
		l.w.b = append(l.w.b, ',')
	}
	l.n++
	l.w.b = append(l.w.b, '"')
	l.w.b = appendEscaped(l.w.b, a)
	l.w.b = append(l.w.b, sep)
	l.w.b = appendEscaped(l.w.b, b)
	l.w.b = append(l.w.b, '"')
}

func (l *docList) end() {
	if l.n == 0 {
		l.w.b = l.w.b[:l.mark]
		l.w.n = l.prevN
		return
	}
	l.w.b = append(l.w.b, ']')
}

// stringSet keeps distinct non-empty strings in insertion order. Sets here hold a few dozen items,
// so a linear scan beats hashing and needs no allocation beyond the caller's backing array.
type stringSet struct{ items []string }

func (s *stringSet) add(v string) {
	if v == "" {
		return
	}
	for _, x := range s.items {
		if x == v {
			return
		}
	}
	s.items = append(s.items, v)
}

// compact removes the whitespace between the tokens of the valid JSON in b, in place.
func compact(b []byte) []byte {
	out := b[:0] // never ahead of the read position, so writing in place is safe
	inString := false
	for i := 0; i < len(b); i++ {
		c := b[i]
		if inString {
			out = append(out, c)
			switch c {
			case '\\':
				i++
				out = append(out, b[i])
			case '"':
				inString = false
			}
			continue
		}
		switch c {
		case ' ', '\t', '\n', '\r':
			continue
		case '"':
			inString = true
		}
		out = append(out, c)
	}
	return out
}

// forEach iterates the members of an object or the elements of an array, and nothing else: gjson's
// ForEach would hand a scalar (null annotations, say) to fn as if it were a member.
func forEach(r gjson.Result, fn func(k, v gjson.Result) bool) {
	if r.IsObject() || r.IsArray() {
		r.ForEach(fn)
	}
}

// AppendString appends s as a JSON string, as the builder writes every string: the NDJSON of a
// _bulk request shares it, so its lines are escaped alike.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	dst = appendEscaped(dst, s)
	return append(dst, '"')
}

// appendEscaped appends s as the inside of a JSON string. Most strings need no escaping and are
// copied in one step; invalid UTF-8 becomes U+FFFD, as encoding/json does.
func appendEscaped(dst []byte, s string) []byte {
	i := 0
	for i < len(s) {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < 0x80 {
			i++
			continue
		}
		dst = append(dst, s[:i]...)
		s = s[i:]
		i = 0
		if c >= 0x80 {
			r, size := utf8.DecodeRuneInString(s)
			if r == utf8.RuneError && size == 1 {
				dst = append(dst, "\ufffd"...)
			} else {
				dst = append(dst, s[:size]...)
			}
			s = s[size:]
			continue
		}
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			const hex = "0123456789abcdef"
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		s = s[1:]
	}
	return append(dst, s...)
}
