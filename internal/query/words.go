package query

import (
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// maxTokenLength is the longest word of the standard tokenizer, in UTF-16 code units: a longer run
// is cut into words of this length.
const maxTokenLength = 255

// words is an upper bound of the number of words the Unicode word break rules (UAX #29, the standard
// tokenizer of Lucene, OpenSearch's standard analyzer) find in s. A run of letters, digits and marks
// of one script class is one word; each Han ideograph, Hiragana character and symbol (an emoji) is
// one on its own, and so is a character this Go release does not know. The rules join some runs this
// counts apart (a.b, 1.5, a_b, a script change within a word), never the other way, so a limit on
// this count holds for the backend's words.
func words(s string) int {
	n, run, class := 0, 0, wordNone
	for _, r := range s {
		c := classOf(r)
		switch {
		case c == wordNone:
			run, class = 0, wordNone
			continue
		case c == wordSingle:
			n++
			run, class = 0, wordNone
			continue
		case c == wordMark && class != wordNone:
			c = class // a combining mark continues its word
		case c == wordMark:
			c = wordOther
		}
		l := utf16.RuneLen(r)
		if c != class || run+l > maxTokenLength {
			n++
			run = 0
		}
		run += l
		class = c
	}
	return n
}

type wordClass int

const (
	wordNone   wordClass = iota // separates words
	wordSingle                  // a word by itself
	wordMark                    // continues the word before it
	wordOther                   // letters and digits of alphabetic scripts
	wordKatakana
	wordHangul
	wordSEAsian // scripts written without spaces, whose runs the standard tokenizer keeps whole
)

func classOf(r rune) wordClass {
	switch {
	case r < utf8.RuneSelf:
		if 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' {
			return wordOther
		}
		return wordNone
	case unicode.IsMark(r):
		return wordMark
	case unicode.In(r, unicode.Ideographic, unicode.Hiragana):
		return wordSingle
	case unicode.Is(unicode.Katakana, r):
		return wordKatakana
	case unicode.Is(unicode.Hangul, r):
		return wordHangul
	case unicode.In(r, unicode.Thai, unicode.Lao, unicode.Khmer, unicode.Myanmar, unicode.Tai_Tham, unicode.Tai_Viet, unicode.New_Tai_Lue):
		return wordSEAsian
	case unicode.IsLetter(r), unicode.IsNumber(r):
		return wordOther
	case unicode.IsSpace(r), unicode.IsPunct(r), unicode.IsControl(r), unicode.Is(unicode.Cf, r):
		return wordNone
	}
	return wordSingle
}
