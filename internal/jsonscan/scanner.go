// Package jsonscan is a strict, allocation-free JSON tokenizer shared by the hashing and keys packages, so that
// "is this valid JSON" means the same thing everywhere in dedupeworker.
//
// A document is valid when it follows the RFC 8259 grammar, every string (names included) is valid UTF-8, every
// escape is well formed, no \u escape is a lone surrogate, nesting is at most DefaultMaxDepth and nothing but
// whitespace follows the value.
//
// The scanner never recurses (nesting is tracked in a fixed bit stack inside the Scanner), so hostile nesting is an
// error rather than a stack overflow, and it does not allocate per token: tokens are slices of the input.
package jsonscan

import (
	"encoding/binary"
	"strconv"
)

// MaxDepth bounds the nesting limit a Scanner can be given (its bit stack holds that many levels); the tests give
// other limits than DefaultMaxDepth.
const MaxDepth = 10000

// DefaultMaxDepth is the nesting limit of a Scanner and of Valid: at most 1000 containers may be open at once.
const DefaultMaxDepth = 1000

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
	// Escaped is true for a Name or String that holds a backslash escape, so that only those need AppendUnescaped
	// (or a search for '\\') to be read; it is false for every other kind.
	Escaped bool
	// Depth is the nesting depth of the token: the top-level value is at depth 0 and the members of a top-level
	// object (names and values) at depth 1. A container's start and end tokens share a depth. It is an int32, and
	// sits before Raw, so that a Token is 32 bytes: returned in registers rather than copied through the stack
	// after every Next (measured: 12 % of a payload digest).
	Depth int32
	// Raw is a slice of the input: for Name and String it includes the quotes and is still escaped; for Number it
	// is the literal; for the other kinds it is the punctuation or keyword. It is nil for EOF.
	Raw []byte
}

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

// Scanner reads one JSON document held in memory, validating it completely as it goes (see the package
// documentation). The zero value is ready for Reset.
type Scanner struct {
	data     []byte
	pos      int
	depth    int
	maxDepth int // 0 means DefaultMaxDepth; only the tests set another
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

// Next returns the next token. After the whole document has been validated it returns a Token of kind EOF (and
// keeps doing so). After an error it keeps returning that error.
//
// It is one function, not a chain of helpers that each hand the Token back: hashing reads every token of a
// body through it, and the copies of the Token up a chain of returns cost as much as scanning it.
func (s *Scanner) Next() (Token, error) {
	if s.err != nil {
		return Token{}, s.err
	}
	data := s.data
	i := s.pos
	for {
		i = skipSpace(data, i)
		if i >= len(data) {
			if s.state == stDone || s.state == stAfterValue && s.depth == 0 {
				s.pos, s.state = i, stDone
				s.last, s.hasLast = EOF, true
				return Token{Kind: EOF}, nil
			}
			return Token{}, s.fail(i, "unexpected end of input")
		}
		c := data[i]
		var k Kind
		end := i + 1
		esc := false
		d := s.depth
		switch s.state {
		case stValue, stArrFirst:
			switch c {
			case '"':
				e, es, err := s.scanString(i)
				if err != nil {
					return Token{}, err
				}
				k, end, esc = String, e, es
				s.state = stAfterValue
			case '{', '[':
				if err := s.open(i, c); err != nil {
					return Token{}, err
				}
				k = ObjectStart
				if c == '[' {
					k = ArrayStart
				}
			case ']':
				if s.state != stArrFirst {
					return Token{}, s.fail(i, describe(data, i)+" looking for beginning of value")
				}
				k, d = ArrayEnd, s.close()
			case 't', 'f', 'n':
				lit, lk := "true", True
				if c == 'f' {
					lit, lk = "false", False
				} else if c == 'n' {
					lit, lk = "null", Null
				}
				e, err := s.literal(i, lit)
				if err != nil {
					return Token{}, err
				}
				k, end = lk, e
				s.state = stAfterValue
			default:
				if c != '-' && (c < '0' || c > '9') {
					return Token{}, s.fail(i, describe(data, i)+" looking for beginning of value")
				}
				e, err := s.number(i)
				if err != nil {
					return Token{}, err
				}
				k, end = Number, e
				s.state = stAfterValue
			}
		case stObjFirst, stName:
			switch {
			case c == '"':
				e, es, err := s.scanString(i)
				if err != nil {
					return Token{}, err
				}
				k, end, esc = Name, e, es
				s.state = stColon
			case c == '}' && s.state == stObjFirst:
				k, d = ObjectEnd, s.close()
			default:
				return Token{}, s.fail(i, describe(data, i)+" looking for beginning of object key string")
			}
		case stColon:
			if c != ':' {
				return Token{}, s.fail(i, describe(data, i)+" after object key")
			}
			i++
			s.state = stValue
			continue
		case stAfterValue:
			if d == 0 {
				return Token{}, s.fail(i, "trailing data after the JSON value")
			}
			switch obj := s.inObject(); {
			case c == ',' && obj:
				i, s.state = i+1, stName
				continue
			case c == ',':
				i, s.state = i+1, stValue
				continue
			case c == '}' && obj:
				k, d = ObjectEnd, s.close()
			case c == ']' && !obj:
				k, d = ArrayEnd, s.close()
			case obj:
				return Token{}, s.fail(i, describe(data, i)+" after object key:value pair")
			default:
				return Token{}, s.fail(i, describe(data, i)+" after array element")
			}
		default: // stDone
			s.pos = i
			return Token{Kind: EOF}, nil
		}
		s.pos = end
		s.last, s.hasLast = k, true
		return Token{Kind: k, Escaped: esc, Raw: data[i:end], Depth: int32(d)}, nil
	}
}

// close ends the innermost container and returns the depth its end token has.
func (s *Scanner) close() int {
	s.depth--
	s.state = stAfterValue
	return s.depth
}

// open starts a container ('{' or '[') at offset i, unless the depth limit forbids it.
func (s *Scanner) open(i int, c byte) error {
	lim := s.limit()
	if s.depth >= lim {
		s.err = &SyntaxError{Offset: i, Msg: "nesting deeper than " + strconv.Itoa(lim) + " levels",
			wrapped: ErrTooDeep}
		return s.err
	}
	d := s.depth
	if c == '{' {
		s.stack[d>>6] |= 1 << (uint(d) & 63)
		s.state = stObjFirst
	} else {
		s.stack[d>>6] &^= 1 << (uint(d) & 63)
		s.state = stArrFirst
	}
	s.depth++
	return nil
}

func (s *Scanner) literal(i int, lit string) (int, error) {
	data := s.data
	for j := 1; j < len(lit); j++ {
		if i+j >= len(data) {
			return 0, s.fail(i+j, "unexpected end of input")
		}
		if data[i+j] != lit[j] {
			return 0, s.fail(i+j, describe(data, i+j)+" in literal "+lit+" (expecting '"+lit[j:j+1]+"')")
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
		return 0, s.fail(j, "unexpected end of input")
	}
	return 0, s.fail(j, describe(s.data, j)+" in numeric literal"+what)
}

var isSpace = [256]bool{' ': true, '\t': true, '\n': true, '\r': true}

// skipSpace returns the offset of the first byte at or after i that is not whitespace. Compact bodies have none;
// pretty-printed ones have a newline and a run of indentation before most tokens, taken eight spaces at a time.
func skipSpace(data []byte, i int) int {
	for i < len(data) && isSpace[data[i]] {
		i++
		for i+8 <= len(data) && binary.LittleEndian.Uint64(data[i:]) == lsbs*' ' {
			i += 8
		}
	}
	return i
}
