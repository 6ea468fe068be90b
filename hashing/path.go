package hashing

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Step is one step of a Path: an object member name, or (IsIndex) an array index.
type Step struct {
	Name    string
	Index   int
	IsIndex bool
}

// Path is a parsed jq-flavoured path. The zero value is "." (the whole payload).
type Path struct {
	steps []Step
}

// maxIndex bounds array indexes in paths; no payload this package accepts has an array that long.
const maxIndex = 1<<31 - 1

// ParsePath parses a jq-flavoured path such as .user.id, .items[0] or .["dotted.key"]; docs/sources.md ("Payload
// digests") writes the grammar. As in zizq-elixir, a step may follow a ']' without a dot (".a[0]b" is ".a[0].b"),
// and a quoted name ends at the first `"]`.
func ParsePath(s string) (Path, error) {
	if !strings.HasPrefix(s, ".") {
		return Path{}, pathError(s, "must start with '.'")
	}
	var steps []Step
	i := 1
	for i < len(s) {
		c := s[i]
		switch {
		case c == '.':
			i++
		case strings.HasPrefix(s[i:], `["`):
			name, n, err := quotedKey(s, i+2)
			if err != nil {
				return Path{}, err
			}
			steps = append(steps, Step{Name: name})
			i = n
		case c == '[':
			j := i + 1
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
			if j == i+1 || j >= len(s) || s[j] != ']' {
				end := len(s)
				if k := strings.IndexByte(s[i:], ']'); k >= 0 {
					end = i + k + 1
				}
				return Path{}, pathError(s, fmt.Sprintf("invalid array index %q (want one or more digits 0-9 in [])", s[i:end]))
			}
			n, err := strconv.Atoi(s[i+1 : j])
			if err != nil || n > maxIndex {
				return Path{}, pathError(s, fmt.Sprintf("invalid array index %q (too large)", s[i:j+1]))
			}
			steps = append(steps, Step{Index: n, IsIndex: true})
			i = j + 1
		case nameStart(c):
			j := i + 1
			for j < len(s) && nameChar(s[j]) {
				j++
			}
			steps = append(steps, Step{Name: s[i:j]})
			i = j
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size <= 1 {
				return Path{}, pathError(s, fmt.Sprintf("invalid UTF-8 at offset %d", i))
			}
			return Path{}, pathError(s, fmt.Sprintf("unexpected character %s at offset %d", strconv.QuoteRune(r), i))
		}
	}
	return Path{steps: steps}, nil
}

// quotedKey reads a quoted key whose text starts at i (just after `["`), returning the key and the offset just
// past the closing `"]`.
func quotedKey(s string, i int) (string, int, error) {
	var b strings.Builder
	for i < len(s) {
		if strings.HasPrefix(s[i:], `"]`) {
			return b.String(), i + 2, nil
		}
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size <= 1 {
			return "", 0, pathError(s, fmt.Sprintf("invalid UTF-8 at offset %d", i))
		}
		b.WriteString(s[i : i+size])
		i += size
	}
	return "", 0, pathError(s, "unterminated quoted key (want `\"]`)")
}

func pathError(path, problem string) error {
	return fmt.Errorf("hashing: path %q: %s", path, problem)
}

func nameStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_'
}

func nameChar(c byte) bool { return nameStart(c) || c >= '0' && c <= '9' }

// Steps returns the path's steps, outermost first; "." has none. The slice is a copy.
func (p Path) Steps() []Step { return slices.Clone(p.steps) }
