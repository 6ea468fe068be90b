package jsonscan

import (
	"bytes"
	"unicode/utf8"
)

// IsInteger reports whether a Number token is an integer literal: it has no '.', 'e' or 'E'.
func IsInteger(num []byte) bool {
	for _, c := range num {
		if c == '.' || c == 'e' || c == 'E' {
			return false
		}
	}
	return true
}

// AppendUnescaped appends the decoded content of a Name or String token (raw includes the quotes and must have come
// from the scanner) to dst and returns the extended slice.
func AppendUnescaped(dst, raw []byte) []byte {
	if len(raw) < 2 {
		return dst
	}
	body := raw[1 : len(raw)-1]
	for len(body) > 0 {
		k := bytes.IndexByte(body, '\\')
		if k < 0 {
			return append(dst, body...)
		}
		dst = append(dst, body[:k]...)
		r, n := decodeEscape(body[k:])
		if r < utf8.RuneSelf {
			dst = append(dst, byte(r))
		} else {
			dst = utf8.AppendRune(dst, r)
		}
		body = body[k+n:]
	}
	return dst
}

// EqualName reports whether the Name or String token raw (escaped, with quotes) decodes to exactly name. It does
// not allocate.
func EqualName(raw []byte, name string) bool {
	if len(raw) < 2 {
		return false
	}
	body := raw[1 : len(raw)-1]
	if bytes.IndexByte(body, '\\') < 0 {
		return string(body) == name
	}
	var buf [utf8.UTFMax]byte
	for len(body) > 0 {
		if body[0] != '\\' {
			if len(name) == 0 || name[0] != body[0] {
				return false
			}
			name = name[1:]
			body = body[1:]
			continue
		}
		r, n := decodeEscape(body)
		w := utf8.EncodeRune(buf[:], r)
		if len(name) < w || name[:w] != string(buf[:w]) {
			return false
		}
		name = name[w:]
		body = body[n:]
	}
	return len(name) == 0
}

// decodeEscape decodes the escape sequence at the start of b (b[0] == '\\'), returning the rune and the number of
// bytes consumed. Malformed input (which the scanner never produces) decodes to U+FFFD without panicking.
func decodeEscape(b []byte) (rune, int) {
	if len(b) < 2 {
		return utf8.RuneError, len(b)
	}
	if c := unescaped[b[1]]; c != 0 {
		return rune(c), 2
	}
	if b[1] == 'u' {
		r, bad := parseHex4(b[2:])
		if bad >= 0 {
			return utf8.RuneError, min(len(b), 2)
		}
		if r >= 0xD800 && r <= 0xDBFF && len(b) >= 12 && b[6] == '\\' && b[7] == 'u' {
			if lo, bad := parseHex4(b[8:]); bad < 0 && lo >= 0xDC00 && lo <= 0xDFFF {
				return 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00), 12
			}
		}
		if r >= 0xD800 && r <= 0xDFFF {
			return utf8.RuneError, 6
		}
		return r, 6
	}
	return utf8.RuneError, 2
}

// unescaped maps the byte after a backslash to the byte it stands for, for the escapes other than \u; 0 for others.
var unescaped = [256]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

// parseHex4 decodes the four hex digits at the start of b; bad is the index of the first byte that is not one
// (len(b) when b is shorter), or -1.
func parseHex4(b []byte) (r rune, bad int) {
	for k := range 4 {
		if k >= len(b) || unhex[b[k]] < 0 {
			return 0, k
		}
		r = r<<4 | rune(unhex[b[k]])
	}
	return r, -1
}
