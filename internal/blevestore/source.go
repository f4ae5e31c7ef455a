package blevestore

import (
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tidwall/gjson"
)

// OpenSearch filters every _source osstore reads (it always names the fields it wants), and a
// filtered _source is parsed into maps and written again by Jackson: keys keep their order, strings
// are re-escaped (only quotes, backslashes and control characters; everything else as UTF-8),
// integers are written as integers and every other number as a Java double. Items are written the
// same way here, so both stores answer the same bytes for the same stored object.

// metadataKeys are what Query.MetadataOnly keeps of an object.
var metadataKeys = []string{"apiVersion", "kind", "metadata"}

// item writes a stored object as a search answers it: all of it, or only metadataKeys.
func item(obj []byte, metadataOnly bool) []byte {
	root := gjson.ParseBytes(obj)
	out := make([]byte, 0, len(obj))
	if !metadataOnly {
		return appendJackson(out, root)
	}
	out = append(out, '{')
	n := 0
	root.ForEach(func(k, v gjson.Result) bool {
		for _, m := range metadataKeys {
			if k.Str == m {
				if n > 0 {
					out = append(out, ',')
				}
				n++
				out = appendJSONString(out, k.Str)
				out = append(out, ':')
				out = appendJackson(out, v)
			}
		}
		return true
	})
	return append(out, '}')
}

func appendJackson(dst []byte, v gjson.Result) []byte {
	switch {
	case v.IsObject():
		dst = append(dst, '{')
		n := 0
		v.ForEach(func(k, c gjson.Result) bool {
			if n > 0 {
				dst = append(dst, ',')
			}
			n++
			dst = appendJSONString(dst, k.Str)
			dst = append(dst, ':')
			dst = appendJackson(dst, c)
			return true
		})
		return append(dst, '}')
	case v.IsArray():
		dst = append(dst, '[')
		n := 0
		v.ForEach(func(_, c gjson.Result) bool {
			if n > 0 {
				dst = append(dst, ',')
			}
			n++
			dst = appendJackson(dst, c)
			return true
		})
		return append(dst, ']')
	case v.Type == gjson.String:
		return appendJSONString(dst, v.Str)
	case v.Type == gjson.Number:
		return appendNumber(dst, v.Raw)
	case v.Type == gjson.True:
		return append(dst, "true"...)
	case v.Type == gjson.False:
		return append(dst, "false"...)
	}
	return append(dst, "null"...)
}

// appendNumber writes a JSON number as Jackson writes the Java number it parses to.
func appendNumber(dst []byte, raw string) []byte {
	if !strings.ContainsAny(raw, ".eE") {
		if n, err := strconv.ParseInt(raw, 10, 64); err == nil {
			return strconv.AppendInt(dst, n, 10)
		}
		return append(dst, raw...) // a BigInteger: its digits
	}
	f, err := strconv.ParseFloat(raw, 64)
	if err != nil {
		return append(dst, raw...)
	}
	return appendJavaDouble(dst, f)
}

// appendJavaDouble writes f as Java's Double.toString (JDK 19 and later: the shortest digits that
// read back as f): plain between 10^-3 and 10^7, computerized scientific notation otherwise, and
// always a digit after the point.
func appendJavaDouble(dst []byte, f float64) []byte {
	if f == 0 {
		if strconv.FormatFloat(f, 'g', -1, 64)[0] == '-' {
			return append(dst, "-0.0"...)
		}
		return append(dst, "0.0"...)
	}
	a := f
	if a < 0 {
		a = -a
	}
	if a >= 1e-3 && a < 1e7 {
		s := strconv.FormatFloat(f, 'f', -1, 64)
		dst = append(dst, s...)
		if !strings.Contains(s, ".") {
			dst = append(dst, ".0"...)
		}
		return dst
	}
	s := strconv.FormatFloat(f, 'e', -1, 64) // -d.ddde±XX
	mant, exp, _ := strings.Cut(s, "e")
	dst = append(dst, mant...)
	if !strings.Contains(mant, ".") {
		dst = append(dst, ".0"...)
	}
	dst = append(dst, 'E')
	n, _ := strconv.Atoi(exp)
	return strconv.AppendInt(dst, int64(n), 10)
}

const hexDigits = "0123456789ABCDEF"

// appendJSONString writes s quoted as Jackson does.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			_, n := utf8.DecodeRuneInString(s[i:])
			dst = append(dst, s[i:i+n]...)
			i += n
			continue
		}
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\r':
			dst = append(dst, '\\', 'r')
		default:
			if c < 0x20 {
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			} else {
				dst = append(dst, c)
			}
		}
		i++
	}
	return append(dst, '"')
}

// duplicateKey names a key that appears twice in one object of v, or is "": OpenSearch parses
// documents with strict duplicate detection and refuses them.
func duplicateKey(v gjson.Result) string {
	dup := ""
	switch {
	case v.IsObject():
		seen := map[string]bool{}
		v.ForEach(func(k, c gjson.Result) bool {
			if seen[k.Str] {
				dup = k.Str
				return false
			}
			seen[k.Str] = true
			dup = duplicateKey(c)
			return dup == ""
		})
	case v.IsArray():
		v.ForEach(func(_, c gjson.Result) bool {
			dup = duplicateKey(c)
			return dup == ""
		})
	}
	return dup
}
