package blevestore

import (
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/blevesearch/bleve/v2/analysis"
	bunicode "github.com/blevesearch/bleve/v2/analysis/tokenizer/unicode"
)

// The analysis of the text fields (text, name.text) is OpenSearch's standard analyzer: Unicode word
// segmentation (UAX #29), each ideograph a word of its own, words cut at 255 UTF-16 code units, and
// lower-casing, without stop words. Keyword fields are indexed as they are, one term per value.

// maxTokenLength is the standard tokenizer's longest word, in UTF-16 code units.
const maxTokenLength = 255

var segmenter = bunicode.NewUnicodeTokenizer()

// words returns the terms of the standard analyzer for s, in order, repeats kept.
func words(s []byte) []string {
	var out []string
	for _, t := range segmenter.Tokenize(s) {
		term := t.Term
		if t.Type == analysis.Ideographic {
			// Lucene emits every Han ideograph and Hiragana character as a word by itself, and keeps
			// runs of Katakana whole.
			run := 0
			for i := 0; i < len(term); {
				r, n := utf8.DecodeRune(term[i:])
				if unicode.In(r, unicode.Han, unicode.Hiragana) {
					if run < i {
						out = appendCut(out, lower(term[run:i]))
					}
					out = append(out, string(term[i:i+n]))
					run = i + n
				}
				i += n
			}
			if run < len(term) {
				out = appendCut(out, lower(term[run:]))
			}
			continue
		}
		out = appendCut(out, lower(term))
	}
	return out
}

// lower lower-cases every code point, as Lucene's LowerCaseFilter does.
func lower(b []byte) string {
	buf := make([]rune, 0, len(b))
	for _, r := range string(b) {
		buf = append(buf, unicode.ToLower(r))
	}
	return string(buf)
}

// appendCut appends w, cut into words of at most maxTokenLength UTF-16 code units.
func appendCut(out []string, w string) []string {
	n, start := 0, 0
	for i, r := range w {
		l := utf16.RuneLen(r)
		if n+l > maxTokenLength {
			out = append(out, w[start:i])
			start, n = i, 0
		}
		n += l
	}
	if start < len(w) {
		out = append(out, w[start:])
	}
	return out
}

// termsAnalyzer indexes a value as the terms already computed for it: keyword values as one term,
// text as the words above. bleve calls Analyze once per field value.
type termsAnalyzer []string

func (a termsAnalyzer) Analyze([]byte) analysis.TokenStream {
	ts := make(analysis.TokenStream, len(a))
	pos := 0
	for i, t := range a {
		ts[i] = &analysis.Token{Term: []byte(t), Start: pos, End: pos + len(t), Position: i + 1, Type: analysis.AlphaNumeric}
		pos += len(t) + 1
	}
	return ts
}
