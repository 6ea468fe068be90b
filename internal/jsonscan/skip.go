package jsonscan

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
		target = int(t.Depth)
	case ObjectStart, ArrayStart:
		target = s.depth - 1
	default:
		return errSkipMisuse
	}
	return s.skipTo(target)
}

// skipTo validates and passes over everything up to and including the end of the container open at depth target
// (s.depth is target+1 or deeper). It is the token loop of Next without the tokens: the state, the depth and the
// offset stay in locals, and a byte that would be an error (or the depth limit) hands the position over to Next,
// which then reports exactly what it would have reported had it read every token itself. The strings, numbers and
// literals go through the same functions as in Next, so their errors are Next's too.
func (s *Scanner) skipTo(target int) error {
	data := s.data
	lim := s.limit()
	i, st, depth := s.pos, s.state, s.depth
	var end Kind
scan:
	for {
		i = skipSpace(data, i)
		if i >= len(data) {
			break
		}
		c := data[i]
		switch st {
		case stValue, stArrFirst:
			switch c {
			case '"':
				e, _, err := s.scanString(i)
				if err != nil {
					return err
				}
				i, st = e, stAfterValue
				continue
			case '{', '[':
				if depth >= lim {
					break scan
				}
				bit := uint64(1) << (uint(depth) & 63)
				if c == '{' {
					s.stack[depth>>6] |= bit
					st = stObjFirst
				} else {
					s.stack[depth>>6] &^= bit
					st = stArrFirst
				}
				depth++
				i++
				continue
			case ']':
				if st != stArrFirst {
					break scan
				}
				end = ArrayEnd
			case 't', 'f', 'n':
				lit := "true"
				if c == 'f' {
					lit = "false"
				} else if c == 'n' {
					lit = "null"
				}
				e, err := s.literal(i, lit)
				if err != nil {
					return err
				}
				i, st = e, stAfterValue
				continue
			default:
				if c != '-' && (c < '0' || c > '9') {
					break scan
				}
				e, err := s.number(i)
				if err != nil {
					return err
				}
				i, st = e, stAfterValue
				continue
			}
		case stObjFirst, stName:
			if c == '"' {
				e, _, err := s.scanString(i)
				if err != nil {
					return err
				}
				i, st = e, stColon
				continue
			}
			if c != '}' || st != stObjFirst {
				break scan
			}
			end = ObjectEnd
		case stColon:
			if c != ':' {
				break scan
			}
			i++
			st = stValue
			continue
		case stAfterValue:
			d := depth - 1 // depth > target >= 0 here
			obj := s.stack[d>>6]&(1<<(uint(d)&63)) != 0
			switch {
			case c == ',' && obj:
				i, st = i+1, stName
				continue
			case c == ',':
				i, st = i+1, stValue
				continue
			case c == '}' && obj:
				end = ObjectEnd
			case c == ']' && !obj:
				end = ArrayEnd
			default:
				break scan
			}
		default:
			break scan
		}
		// A container closes.
		depth--
		i++
		st = stAfterValue
		if depth == target {
			s.pos, s.state, s.depth = i, st, depth
			s.last, s.hasLast = end, true
			return nil
		}
	}
	s.pos, s.state, s.depth = i, st, depth
	for {
		t, err := s.Next()
		if err != nil {
			return err
		}
		if (t.Kind == ObjectEnd || t.Kind == ArrayEnd) && int(t.Depth) == target {
			return nil
		}
	}
}

// Valid reports whether data is one valid JSON document (with the DefaultMaxDepth limit): nil, or a *SyntaxError
// saying what is wrong and where. It does not allocate when data is valid.
func Valid(data []byte) error {
	var s Scanner
	s.Reset(data)
	t, err := s.Next()
	if err != nil {
		return err
	}
	if t.Kind == ObjectStart || t.Kind == ArrayStart {
		if err := s.skipTo(0); err != nil {
			return err
		}
	}
	// At depth 0 after the value: the end of input, or an error about what follows it.
	_, err = s.Next()
	return err
}
