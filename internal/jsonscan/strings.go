package jsonscan

import (
	"encoding/binary"
	"unicode/utf8"
)

// Masks for looking at eight bytes of a string at once (SWAR): a byte of each, and the high bit of each.
const (
	lsbs = 0x0101010101010101
	msbs = 0x8080808080808080
)

// plainWord reports whether all eight bytes of w (little-endian) are plain: ASCII, not a control character, '"' or
// '\\'. Each term sets a byte's high bit for one kind of byte that needs a closer look; a borrow between bytes
// can only come from a byte that itself matched, so the word-wide answer is exact.
func plainWord(w uint64) bool {
	ctl := (w - lsbs*0x20) &^ w
	q := w ^ (lsbs * '"')
	q = (q - lsbs) &^ q
	bs := w ^ (lsbs * '\\')
	bs = (bs - lsbs) &^ bs
	return (ctl|q|bs|w)&msbs == 0
}

// scanString validates the string whose opening quote is at i and returns the offset just past its closing quote,
// and whether the string holds an escape. Runs of plain ASCII, most of a webhook body, go eight bytes per step.
func (s *Scanner) scanString(i int) (int, bool, error) {
	data := s.data
	j := i + 1
	escaped := false
	for {
		for j+8 <= len(data) && plainWord(binary.LittleEndian.Uint64(data[j:])) {
			j += 8
		}
		for j < len(data) && plain[data[j]] {
			j++
		}
		if j >= len(data) {
			return 0, false, s.fail(j, "unexpected end of input")
		}
		c := data[j]
		switch {
		case c == '"':
			return j + 1, escaped, nil
		case c == '\\':
			n, err := s.escape(j)
			if err != nil {
				return 0, false, err
			}
			j, escaped = n, true
		case c < 0x20:
			return 0, false, s.fail(j, describe(data, j)+" in string literal (control characters must be escaped)")
		default: // non-ASCII
			r, size := utf8.DecodeRune(data[j:])
			if r == utf8.RuneError && size <= 1 {
				return 0, false, s.fail(j, "invalid UTF-8")
			}
			j += size
		}
	}
}

// escape validates the escape sequence whose backslash is at j and returns the offset just past it.
func (s *Scanner) escape(j int) (int, error) {
	data := s.data
	if j+1 >= len(data) {
		return 0, s.fail(j+1, "unexpected end of input")
	}
	switch data[j+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return j + 2, nil
	case 'u':
		r, err := s.hex4(j)
		if err != nil {
			return 0, err
		}
		switch {
		case r >= 0xD800 && r <= 0xDBFF:
			// must be followed by a \u escape of a low surrogate
			if j+7 < len(data) && data[j+6] == '\\' && data[j+7] == 'u' {
				lo, err := s.hex4(j + 6)
				if err != nil {
					return 0, err
				}
				if lo >= 0xDC00 && lo <= 0xDFFF {
					return j + 12, nil
				}
			} else if j+6 >= len(data) || (data[j+6] == '\\' && j+7 >= len(data)) {
				return 0, s.fail(len(data), "unexpected end of input")
			}
			return 0, s.fail(j, "lone surrogate escape "+string(data[j:j+6]))
		case r >= 0xDC00 && r <= 0xDFFF:
			return 0, s.fail(j, "lone surrogate escape "+string(data[j:j+6]))
		}
		return j + 6, nil
	default:
		return 0, s.fail(j+1, describe(data, j+1)+" in string escape code")
	}
}

// hex4 decodes the four hex digits of the \u escape whose backslash is at j.
func (s *Scanner) hex4(j int) (rune, error) {
	r, bad := parseHex4(s.data[j+2:])
	switch k := j + 2 + bad; {
	case bad < 0:
		return r, nil
	case k >= len(s.data):
		return 0, s.fail(k, "unexpected end of input")
	default:
		return 0, s.fail(k, describe(s.data, k)+" in \\u hexadecimal character escape")
	}
}

// plain marks bytes that may appear in a string as themselves without further checks: ASCII other than control
// characters, '"' and '\\'.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

var unhex = func() (t [256]int8) {
	for i := range t {
		t[i] = -1
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = int8(c - '0')
	}
	for c := 'a'; c <= 'f'; c++ {
		t[c] = int8(c - 'a' + 10)
		t[c-'a'+'A'] = int8(c - 'a' + 10)
	}
	return t
}()
