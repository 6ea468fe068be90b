// Package jsonscan is a strict, allocation-free JSON tokenizer shared by the hashing and keys packages, so that
// "is this valid JSON" means the same thing everywhere in dedupeworker.
//
// A document is valid when it follows the RFC 8259 grammar, every string (names included) is valid UTF-8, every
// escape is well formed, no \u escape is a lone surrogate, nesting is at most the scanner's depth limit
// (DefaultMaxDepth unless SetMaxDepth chose otherwise) and nothing but whitespace follows the value.
//
// The scanner never recurses (nesting is tracked in a fixed bit stack inside the Scanner), so hostile nesting is an
// error rather than a stack overflow, and it does not allocate per token: tokens are slices of the input.
package jsonscan

import (
	"bytes"
	"errors"
	"strconv"
	"unicode/utf8"
)

// MaxDepth is the deepest nesting any caller may ask for; DefaultMaxDepth is used when none is set.
const MaxDepth = 10000

// DefaultMaxDepth is the nesting limit of a Scanner on which SetMaxDepth was never called, and of Valid: at most
// 1000 containers may be open at once.
const DefaultMaxDepth = 1000

// minDepth is the lowest limit SetMaxDepth accepts.
const minDepth = 512

// Kind is the kind of a Token.
type Kind uint8

// Token kinds.
const (
	EOF         Kind = iota // end of the document (trailing whitespace only was seen)
	ObjectStart             // {
	ObjectEnd               // }
	ArrayStart              // [
	ArrayEnd                // ]
	Name                    // an object member name (a string token in name position)
	String                  // a string value
	Number                  // a number value (grammar-checked)
	True                    // true
	False                   // false
	Null                    // null
)

var kindNames = [...]string{"EOF", "ObjectStart", "ObjectEnd", "ArrayStart", "ArrayEnd", "Name", "String",
	"Number", "True", "False", "Null"}

func (k Kind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return "Kind(" + strconv.Itoa(int(k)) + ")"
}

// Token is one token of a document.
type Token struct {
	Kind Kind
	// Raw is a slice of the input: for Name and String it includes the quotes and is still escaped; for Number it
	// is the literal; for the other kinds it is the punctuation or keyword. It is nil for EOF.
	Raw []byte
	// Depth is the nesting depth of the token: the top-level value is at depth 0 and the members of a top-level
	// object (names and values) at depth 1. A container's start and end tokens share a depth.
	Depth int
}

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

// scanner states: what the next significant byte may be.
const (
	stValue      uint8 = iota // a value (top level, after ':' or after ',' in an array)
	stArrFirst                // a value or ']' (just after '[')
	stObjFirst                // a name or '}' (just after '{')
	stName                    // a name (after ',' in an object)
	stColon                   // ':' (after a name)
	stAfterValue              // ',' or the closing bracket, or the end of input at depth 0
	stDone                    // EOF was returned
)

// Scanner reads one JSON document held in memory, validating it completely as it goes: RFC 8259 grammar, valid
// UTF-8 everywhere, escapes well formed, no lone surrogate \u escapes, nesting within the limit, and nothing but
// whitespace after the value. It never recurses and does not allocate per token (the depth stack is a fixed bit
// set inside the Scanner). The zero value is ready for Reset.
type Scanner struct {
	data     []byte
	pos      int
	depth    int
	maxDepth int // 0 means DefaultMaxDepth
	state    uint8
	last     Kind // kind of the last token returned, for SkipValue
	hasLast  bool
	err      error
	stack    [MaxDepth/64 + 1]uint64 // bit set: 1 = the container open at that level is an object
}

// Reset starts on a new document, keeping the depth limit.
func (s *Scanner) Reset(data []byte) {
	s.data = data
	s.pos = 0
	s.depth = 0
	s.state = stValue
	s.hasLast = false
	s.err = nil
}

// SetMaxDepth sets the nesting limit, clamped to [512, MaxDepth]. It applies from the next container opened.
func (s *Scanner) SetMaxDepth(n int) {
	s.maxDepth = min(max(n, minDepth), MaxDepth)
}

func (s *Scanner) limit() int {
	if s.maxDepth == 0 {
		return DefaultMaxDepth
	}
	return s.maxDepth
}

func (s *Scanner) inObject() bool {
	d := s.depth - 1
	return s.stack[d>>6]&(1<<(uint(d)&63)) != 0
}

func (s *Scanner) fail(off int, msg string) (Token, error) {
	s.err = &SyntaxError{Offset: off, Msg: msg}
	return Token{}, s.err
}

// Next returns the next token. After the whole document has been validated it returns a Token of kind EOF (and
// keeps doing so). After an error it keeps returning that error.
func (s *Scanner) Next() (Token, error) {
	if s.err != nil {
		return Token{}, s.err
	}
	t, err := s.next()
	if err == nil {
		s.last, s.hasLast = t.Kind, true
	}
	return t, err
}

func (s *Scanner) next() (Token, error) {
	data := s.data
	for {
		i := s.pos
		for i < len(data) && isSpace[data[i]] {
			i++
		}
		s.pos = i
		switch s.state {
		case stValue:
			return s.value(i)
		case stArrFirst:
			if i < len(data) && data[i] == ']' {
				return s.closeContainer(i, ArrayEnd), nil
			}
			return s.value(i)
		case stObjFirst:
			if i < len(data) && data[i] == '}' {
				return s.closeContainer(i, ObjectEnd), nil
			}
			return s.name(i, "looking for beginning of object key string")
		case stName:
			return s.name(i, "looking for beginning of object key string")
		case stColon:
			if i >= len(data) {
				return s.fail(i, "unexpected end of input")
			}
			if data[i] != ':' {
				return s.fail(i, describe(data, i)+" after object key")
			}
			s.pos = i + 1
			s.state = stValue
		case stAfterValue:
			if s.depth == 0 {
				if i < len(data) {
					return s.fail(i, "trailing data after the JSON value")
				}
				s.state = stDone
				return Token{Kind: EOF}, nil
			}
			if i >= len(data) {
				return s.fail(i, "unexpected end of input")
			}
			c := data[i]
			if s.inObject() {
				switch c {
				case ',':
					s.pos = i + 1
					s.state = stName
				case '}':
					return s.closeContainer(i, ObjectEnd), nil
				default:
					return s.fail(i, describe(data, i)+" after object key:value pair")
				}
			} else {
				switch c {
				case ',':
					s.pos = i + 1
					s.state = stValue
				case ']':
					return s.closeContainer(i, ArrayEnd), nil
				default:
					return s.fail(i, describe(data, i)+" after array element")
				}
			}
		default: // stDone
			return Token{Kind: EOF}, nil
		}
	}
}

func (s *Scanner) closeContainer(i int, k Kind) Token {
	s.depth--
	s.pos = i + 1
	s.state = stAfterValue
	return Token{Kind: k, Raw: s.data[i : i+1], Depth: s.depth}
}

func (s *Scanner) openContainer(i int, k Kind) (Token, error) {
	lim := s.limit()
	if s.depth >= lim {
		s.err = &SyntaxError{Offset: i, Msg: "nesting deeper than " + strconv.Itoa(lim) + " levels",
			wrapped: ErrTooDeep}
		return Token{}, s.err
	}
	d := s.depth
	if k == ObjectStart {
		s.stack[d>>6] |= 1 << (uint(d) & 63)
		s.state = stObjFirst
	} else {
		s.stack[d>>6] &^= 1 << (uint(d) & 63)
		s.state = stArrFirst
	}
	s.depth++
	s.pos = i + 1
	return Token{Kind: k, Raw: s.data[i : i+1], Depth: d}, nil
}

func (s *Scanner) name(i int, ctx string) (Token, error) {
	data := s.data
	if i >= len(data) {
		return s.fail(i, "unexpected end of input")
	}
	if data[i] != '"' {
		return s.fail(i, describe(data, i)+" "+ctx)
	}
	end, err := s.scanString(i)
	if err != nil {
		return Token{}, err
	}
	s.pos = end
	s.state = stColon
	return Token{Kind: Name, Raw: data[i:end], Depth: s.depth}, nil
}

func (s *Scanner) value(i int) (Token, error) {
	data := s.data
	if i >= len(data) {
		return s.fail(i, "unexpected end of input")
	}
	var k Kind
	var end int
	switch c := data[i]; c {
	case '{':
		return s.openContainer(i, ObjectStart)
	case '[':
		return s.openContainer(i, ArrayStart)
	case '"':
		e, err := s.scanString(i)
		if err != nil {
			return Token{}, err
		}
		k, end = String, e
	case 't':
		e, err := s.literal(i, "true")
		if err != nil {
			return Token{}, err
		}
		k, end = True, e
	case 'f':
		e, err := s.literal(i, "false")
		if err != nil {
			return Token{}, err
		}
		k, end = False, e
	case 'n':
		e, err := s.literal(i, "null")
		if err != nil {
			return Token{}, err
		}
		k, end = Null, e
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			e, err := s.number(i)
			if err != nil {
				return Token{}, err
			}
			k, end = Number, e
		} else {
			return s.fail(i, describe(data, i)+" looking for beginning of value")
		}
	}
	s.pos = end
	s.state = stAfterValue
	return Token{Kind: k, Raw: data[i:end], Depth: s.depth}, nil
}

func (s *Scanner) literal(i int, lit string) (int, error) {
	data := s.data
	for j := 1; j < len(lit); j++ {
		if i+j >= len(data) {
			_, err := s.fail(i+j, "unexpected end of input")
			return 0, err
		}
		if data[i+j] != lit[j] {
			_, err := s.fail(i+j, describe(data, i+j)+" in literal "+lit+" (expecting '"+lit[j:j+1]+"')")
			return 0, err
		}
	}
	return i + len(lit), nil
}

// number scans a number starting at i and returns the offset just past it.
func (s *Scanner) number(i int) (int, error) {
	data := s.data
	j := i
	if data[j] == '-' {
		j++
	}
	switch {
	case j < len(data) && data[j] == '0':
		j++
		if j < len(data) && data[j] >= '0' && data[j] <= '9' {
			return s.numberFail(j, " (leading zero)")
		}
	case j < len(data) && data[j] >= '1' && data[j] <= '9':
		j++
		for j < len(data) && data[j] >= '0' && data[j] <= '9' {
			j++
		}
	default:
		return s.numberFail(j, " (expecting digit)")
	}
	if j < len(data) && data[j] == '.' {
		j++
		if j >= len(data) || data[j] < '0' || data[j] > '9' {
			return s.numberFail(j, " (expecting digit after '.')")
		}
		for j < len(data) && data[j] >= '0' && data[j] <= '9' {
			j++
		}
	}
	if j < len(data) && (data[j] == 'e' || data[j] == 'E') {
		j++
		if j < len(data) && (data[j] == '+' || data[j] == '-') {
			j++
		}
		if j >= len(data) || data[j] < '0' || data[j] > '9' {
			return s.numberFail(j, " (expecting digit in exponent)")
		}
		for j < len(data) && data[j] >= '0' && data[j] <= '9' {
			j++
		}
	}
	return j, nil
}

func (s *Scanner) numberFail(j int, what string) (int, error) {
	if j >= len(s.data) {
		_, err := s.fail(j, "unexpected end of input")
		return 0, err
	}
	_, err := s.fail(j, describe(s.data, j)+" in numeric literal"+what)
	return 0, err
}

// scanString validates the string whose opening quote is at i and returns the offset just past its closing quote.
func (s *Scanner) scanString(i int) (int, error) {
	data := s.data
	j := i + 1
	for {
		// fast path: plain ASCII
		for j < len(data) && plain[data[j]] {
			j++
		}
		if j >= len(data) {
			_, err := s.fail(j, "unexpected end of input")
			return 0, err
		}
		c := data[j]
		switch {
		case c == '"':
			return j + 1, nil
		case c == '\\':
			n, err := s.escape(j)
			if err != nil {
				return 0, err
			}
			j = n
		case c < 0x20:
			_, err := s.fail(j, describe(data, j)+" in string literal (control characters must be escaped)")
			return 0, err
		default: // non-ASCII
			r, size := utf8.DecodeRune(data[j:])
			if r == utf8.RuneError && size <= 1 {
				_, err := s.fail(j, "invalid UTF-8")
				return 0, err
			}
			j += size
		}
	}
}

// escape validates the escape sequence whose backslash is at j and returns the offset just past it.
func (s *Scanner) escape(j int) (int, error) {
	data := s.data
	if j+1 >= len(data) {
		_, err := s.fail(j+1, "unexpected end of input")
		return 0, err
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
				_, err := s.fail(len(data), "unexpected end of input")
				return 0, err
			}
			_, err := s.fail(j, "lone surrogate escape "+string(data[j:j+6]))
			return 0, err
		case r >= 0xDC00 && r <= 0xDFFF:
			_, err := s.fail(j, "lone surrogate escape "+string(data[j:j+6]))
			return 0, err
		}
		return j + 6, nil
	default:
		_, err := s.fail(j+1, describe(data, j+1)+" in string escape code")
		return 0, err
	}
}

// hex4 decodes the four hex digits of the \u escape whose backslash is at j.
func (s *Scanner) hex4(j int) (rune, error) {
	data := s.data
	var r rune
	for k := j + 2; k < j+6; k++ {
		if k >= len(data) {
			_, err := s.fail(k, "unexpected end of input")
			return 0, err
		}
		h := unhex[data[k]]
		if h < 0 {
			_, err := s.fail(k, describe(data, k)+" in \\u hexadecimal character escape")
			return 0, err
		}
		r = r<<4 | rune(h)
	}
	return r, nil
}

// SkipValue skips what the last token opened, validating it. After a Name it skips that member's value; after an
// ObjectStart or ArrayStart it skips to (and consumes) the matching end token. Called at any other point it returns
// an error.
func (s *Scanner) SkipValue() error {
	if s.err != nil {
		return s.err
	}
	if !s.hasLast {
		return errSkipMisuse
	}
	var target int
	switch s.last {
	case Name:
		t, err := s.Next()
		if err != nil {
			return err
		}
		if t.Kind != ObjectStart && t.Kind != ArrayStart {
			return nil
		}
		target = t.Depth
	case ObjectStart, ArrayStart:
		target = s.depth - 1
	default:
		return errSkipMisuse
	}
	for {
		t, err := s.Next()
		if err != nil {
			return err
		}
		if (t.Kind == ObjectEnd || t.Kind == ArrayEnd) && t.Depth == target {
			return nil
		}
	}
}

// Valid reports whether data is one valid JSON document (with the DefaultMaxDepth limit): nil, or a *SyntaxError
// saying what is wrong and where. It does not allocate when data is valid.
func Valid(data []byte) error {
	var s Scanner
	s.Reset(data)
	for {
		t, err := s.Next()
		if err != nil {
			return err
		}
		if t.Kind == EOF {
			return nil
		}
	}
}

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
	switch b[1] {
	case '"', '\\', '/':
		return rune(b[1]), 2
	case 'b':
		return '\b', 2
	case 'f':
		return '\f', 2
	case 'n':
		return '\n', 2
	case 'r':
		return '\r', 2
	case 't':
		return '\t', 2
	case 'u':
		r, ok := parseHex4(b[2:])
		if !ok {
			return utf8.RuneError, min(len(b), 2)
		}
		if r >= 0xD800 && r <= 0xDBFF && len(b) >= 12 && b[6] == '\\' && b[7] == 'u' {
			if lo, ok := parseHex4(b[8:]); ok && lo >= 0xDC00 && lo <= 0xDFFF {
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

func parseHex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		h := unhex[c]
		if h < 0 {
			return 0, false
		}
		r = r<<4 | rune(h)
	}
	return r, true
}

// describe names the byte at data[i] for an error message: "invalid character 'x'", or "invalid UTF-8" when the
// bytes there are not UTF-8.
func describe(data []byte, i int) string {
	c := data[i]
	if c < utf8.RuneSelf {
		return "invalid character " + quoteChar(rune(c))
	}
	r, size := utf8.DecodeRune(data[i:])
	if r == utf8.RuneError && size <= 1 {
		return "invalid UTF-8"
	}
	return "invalid character " + quoteChar(r)
}

func quoteChar(r rune) string {
	switch r {
	case '\'':
		return `'\''`
	case '"':
		return `'"'`
	}
	q := strconv.QuoteRune(r)
	return "'" + q[1:len(q)-1] + "'"
}

var isSpace = [256]bool{' ': true, '\t': true, '\n': true, '\r': true}

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
