package hashing_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/dedupeworker/dedupeworker/internal/jsonscan"
)

// naiveDigest is the obvious implementation: encoding/json into any (with UseNumber, so numbers keep their
// literal), then a recursive canonical re-encode into a string, then SHA-256. It is the benchmark baseline and an
// independent reference for the fuzz test. It does not detect lone surrogates or invalid UTF-8 (encoding/json
// replaces them).
func naiveDigest(raw []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", err
	}
	if _, err := dec.Token(); err != io.EOF {
		return "", errors.New("trailing data")
	}
	var b strings.Builder
	if err := naiveEncode(&b, v); err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:]), nil
}

func naiveEncode(b *strings.Builder, v any) error {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		b.WriteString("{")
		for _, k := range keys {
			naiveString(b, k)
			b.WriteString(":")
			if err := naiveEncode(b, v[k]); err != nil {
				return err
			}
			b.WriteString(",")
		}
		b.WriteString("}")
	case []any:
		b.WriteString("[")
		for _, e := range v {
			if err := naiveEncode(b, e); err != nil {
				return err
			}
			b.WriteString(",")
		}
		b.WriteString("]")
	case string:
		naiveString(b, v)
	case json.Number:
		s := string(v)
		if !strings.ContainsAny(s, ".eE") {
			if s == "-0" {
				s = "0"
			}
			b.WriteString(s)
			return nil
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return err
		}
		b.WriteString(naiveFloat(f))
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case nil:
		b.WriteString("null")
	}
	return nil
}

func naiveString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			b.WriteString(`\"`)
		case c == '\\':
			b.WriteString(`\\`)
		case c == '\b':
			b.WriteString(`\b`)
		case c == '\t':
			b.WriteString(`\t`)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\f':
			b.WriteString(`\f`)
		case c == '\r':
			b.WriteString(`\r`)
		case c < 0x20:
			fmt.Fprintf(b, `\u%04X`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
}

// naiveFloat is an independent rendering of Erlang's float_to_binary(F, [short]): build both candidates with
// strconv and keep the shorter (plain on a tie), scientific only at or beyond 2^53.
func naiveFloat(f float64) string {
	plain := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.Contains(plain, ".") {
		plain += ".0"
	}
	e := strconv.FormatFloat(f, 'e', -1, 64) // 1.5e-07
	mant, exp, _ := strings.Cut(e, "e")
	if !strings.Contains(mant, ".") {
		mant += ".0"
	}
	n, _ := strconv.Atoi(exp)
	sci := mant + "e" + strconv.Itoa(n)
	if math.Abs(f) >= 1<<53 || len(sci) < len(plain) {
		return sci
	}
	return plain
}

// jv is an order-preserving tree of a document, for re-emitting it differently.
type jv struct {
	kind  jsonscan.Kind
	raw   []byte
	names [][]byte // raw names, for objects
	kids  []*jv
}

func parseTree(data []byte) (*jv, error) {
	var s jsonscan.Scanner
	s.Reset(data)
	var stack []*jv
	var root *jv
	var name []byte
	for {
		tk, err := s.Next()
		if err != nil {
			return nil, err
		}
		switch tk.Kind {
		case jsonscan.EOF:
			return root, nil
		case jsonscan.Name:
			name = tk.Raw
			continue
		case jsonscan.ObjectEnd, jsonscan.ArrayEnd:
			stack = stack[:len(stack)-1]
			continue
		}
		v := &jv{kind: tk.Kind, raw: tk.Raw}
		if len(stack) == 0 {
			root = v
		} else {
			p := stack[len(stack)-1]
			if p.kind == jsonscan.ObjectStart {
				p.names = append(p.names, name)
			}
			p.kids = append(p.kids, v)
		}
		if tk.Kind == jsonscan.ObjectStart || tk.Kind == jsonscan.ArrayStart {
			stack = append(stack, v)
		}
	}
}

type reemit struct {
	reverse   bool   // reverse object members (after dropping shadowed duplicates)
	indent    string // "" for compact
	escapeAll bool   // write every string character as a \u escape, and floats in another notation
}

func (o reemit) emit(b *bytes.Buffer, v *jv, depth int) {
	nl := func(d int) {
		if o.indent != "" {
			b.WriteByte('\n')
			for range d {
				b.WriteString(o.indent)
			}
		}
	}
	switch v.kind {
	case jsonscan.ObjectStart:
		// Drop members shadowed by a later one with the same name, so that reordering keeps the meaning.
		var idx []int
		for i := range v.names {
			shadowed := false
			for j := i + 1; j < len(v.names); j++ {
				if bytes.Equal(jsonscan.AppendUnescaped(nil, v.names[i]), jsonscan.AppendUnescaped(nil, v.names[j])) {
					shadowed = true
					break
				}
			}
			if !shadowed {
				idx = append(idx, i)
			}
		}
		if o.reverse {
			slices.Reverse(idx)
		}
		b.WriteString("{")
		for n, i := range idx {
			if n > 0 {
				b.WriteString(",")
			}
			nl(depth + 1)
			o.str(b, v.names[i])
			if o.indent != "" {
				b.WriteString(" : ")
			} else {
				b.WriteString(":")
			}
			o.emit(b, v.kids[i], depth+1)
		}
		nl(depth)
		b.WriteString("}")
	case jsonscan.ArrayStart:
		b.WriteString("[")
		for i, k := range v.kids {
			if i > 0 {
				b.WriteString(",")
			}
			nl(depth + 1)
			o.emit(b, k, depth+1)
		}
		nl(depth)
		b.WriteString("]")
	case jsonscan.String:
		o.str(b, v.raw)
	case jsonscan.Number:
		if o.escapeAll && !jsonscan.IsInteger(v.raw) {
			f, err := strconv.ParseFloat(string(v.raw), 64)
			if err == nil {
				b.WriteString(strconv.FormatFloat(f, 'E', -1, 64))
				return
			}
		}
		b.Write(v.raw)
	default:
		b.Write(v.raw)
	}
}

func (o reemit) str(b *bytes.Buffer, raw []byte) {
	if !o.escapeAll {
		b.Write(raw)
		return
	}
	s := jsonscan.AppendUnescaped(nil, raw)
	b.WriteByte('"')
	for len(s) > 0 {
		r, n := utf8.DecodeRune(s)
		s = s[n:]
		if r >= 0x10000 {
			r -= 0x10000
			fmt.Fprintf(b, `\u%04x\u%04X`, 0xD800+(r>>10), 0xDC00+(r&0x3FF))
		} else {
			fmt.Fprintf(b, `\u%04x`, r)
		}
	}
	b.WriteByte('"')
}
