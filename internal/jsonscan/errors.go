package jsonscan

import (
	"errors"
	"strconv"
	"unicode/utf8"
)

// SyntaxError describes why a document is not valid.
type SyntaxError struct {
	Offset int    // byte offset in the input where the problem was found
	Msg    string // what is wrong, e.g. "invalid UTF-8" or "unexpected end of input"

	wrapped error // ErrTooDeep for the depth case
}

func (e *SyntaxError) Error() string {
	return e.Msg + " at offset " + strconv.Itoa(e.Offset)
}

// Unwrap returns ErrTooDeep when the document nests deeper than the limit, and nil otherwise.
func (e *SyntaxError) Unwrap() error { return e.wrapped }

// ErrTooDeep is matched (errors.Is) by the SyntaxError of a document nested deeper than the scanner's limit.
var ErrTooDeep = errors.New("jsonscan: nesting too deep")

// errSkipMisuse is returned by SkipValue when it is not called right after a Name, ObjectStart or ArrayStart.
var errSkipMisuse = errors.New("jsonscan: SkipValue called without a preceding Name, ObjectStart or ArrayStart")

func (s *Scanner) fail(off int, msg string) error {
	s.err = &SyntaxError{Offset: off, Msg: msg}
	return s.err
}

// describe names the byte at data[i] for an error message: "invalid character 'x'", or "invalid UTF-8" when the
// bytes there are not UTF-8.
func describe(data []byte, i int) string {
	r, size := utf8.DecodeRune(data[i:])
	if r == utf8.RuneError && size <= 1 {
		return "invalid UTF-8"
	}
	return "invalid character " + strconv.QuoteRune(r)
}
