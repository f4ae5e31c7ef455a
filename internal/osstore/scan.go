package osstore

import (
	"bytes"
	"errors"
)

// The functions here walk OpenSearch's JSON answers in one pass, without building anything: a page
// of 100 Pods is about 730 KB, and reading it path by path (gjson) scans the hits once for every
// level between the answer and an object (the hits array, each hit, its _source, the object). They
// trust the input to be JSON, as OpenSearch writes it: they find where values end, and stop with
// errBadJSON on what cannot be read, never on every invalid input.

var errBadJSON = errors.New("osstore: malformed JSON in OpenSearch's answer")

// skipSpace returns the index of the first byte at or after i that is not JSON whitespace.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\n' || b[i] == '\r' || b[i] == '\t') {
		i++
	}
	return i
}

// skipString returns the index past the string that opens at b[i], or -1.
func skipString(b []byte, i int) int {
	for j := i + 1; ; j++ {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return -1
		}
		j += k
		// A quote is escaped by an odd run of backslashes before it.
		n := 0
		for m := j - 1; m > i && b[m] == '\\'; m-- {
			n++
		}
		if n%2 == 0 {
			return j + 1
		}
	}
}

// skipValue returns the index past the value that starts at b[i] (i after any whitespace), or -1.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				if i = skipString(b, i); i < 0 {
					return -1
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return -1
	}
	// A number, true, false or null.
	start := i
	for i < len(b) && b[i] != ',' && b[i] != '}' && b[i] != ']' && b[i] != ' ' && b[i] != '\n' && b[i] != '\r' && b[i] != '\t' {
		i++
	}
	if i == start {
		return -1
	}
	return i
}

// eachMember calls member for every member of the object that starts at b[i] (i after any
// whitespace), with its key as written (without quotes, escapes left as they are) and the index of
// its value; member returns the index past the value, having read or skipped it, or -1. eachMember
// returns the index past the object, or -1.
func eachMember(b []byte, i int, member func(key []byte, v int) int) int {
	if i >= len(b) || b[i] != '{' {
		return -1
	}
	if i = skipSpace(b, i+1); i < len(b) && b[i] == '}' {
		return i + 1
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return -1
		}
		end := skipString(b, i)
		if end < 0 {
			return -1
		}
		key := b[i+1 : end-1]
		if i = skipSpace(b, end); i >= len(b) || b[i] != ':' {
			return -1
		}
		if i = member(key, skipSpace(b, i+1)); i < 0 {
			return -1
		}
		var more bool
		if i, more = afterValue(b, i, '}'); !more {
			return i
		}
	}
}

// afterValue reads what follows a member or an element at b[i]: a comma, after which the next one
// starts at next (more), or closing, after which the object or array ends at next; next is -1 for
// anything else.
func afterValue(b []byte, i int, closing byte) (next int, more bool) {
	if i = skipSpace(b, i); i >= len(b) {
		return -1, false
	}
	switch b[i] {
	case ',':
		return skipSpace(b, i+1), true
	case closing:
		return i + 1, false
	default:
		return -1, false
	}
}

// eachElement calls element for every element of the array that starts at b[i] (i after any
// whitespace), with the index of the element; element returns the index past it, or -1.
// eachElement returns the index past the array, or -1.
func eachElement(b []byte, i int, element func(v int) int) int {
	if i >= len(b) || b[i] != '[' {
		return -1
	}
	if i = skipSpace(b, i+1); i < len(b) && b[i] == ']' {
		return i + 1
	}
	for {
		if i = element(i); i < 0 {
			return -1
		}
		var more bool
		if i, more = afterValue(b, i, ']'); !more {
			return i
		}
	}
}
