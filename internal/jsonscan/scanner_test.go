package jsonscan_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dedupeworker/dedupeworker/internal/jsonscan"
)

func TestValidDocuments(t *testing.T) {
	valid := []string{
		`0`, `-0`, `1`, `-1`, `123`, `1.5`, `-0.0`, `1e5`, `1E5`, `1e+5`, `1e-5`, `0.5e-10`, `12345678901234567890123`,
		`true`, `false`, `null`, `""`, `"a"`, `{}`, `[]`, ` [ ] `, "\t{\n}\r\n",
		`{"a":1}`, `{"a":[1,2,{"b":null}],"c":"d"}`, `[[[]]]`, `[1,"2",true,false,null,{},[]]`,
		`"\"\\\/\b\f\n\r\t"`, `"\u0000"`, `"\u00e9"`, `"\u00E9"`, `"\ud83d\ude00"`, `"\uD83D\uDE00"`,
		`"é✨😀"`, `{"é":"\u2028"}`, "\"\u007f\"", `{"a":1,"a":2}`,
	}
	for _, doc := range valid {
		if err := jsonscan.Valid([]byte(doc)); err != nil {
			t.Errorf("Valid(%q) = %v, want nil", doc, err)
		}
	}
}

func TestInvalidDocuments(t *testing.T) {
	tests := []struct {
		doc, msg string
		off      int
	}{
		{``, "unexpected end of input", 0},
		{`   `, "unexpected end of input", 3},
		{"\t\n", "unexpected end of input", 2},
		{`01`, "invalid character '1' in numeric literal (leading zero)", 1},
		{`-01`, "invalid character '1' in numeric literal (leading zero)", 2},
		{`-`, "unexpected end of input", 1},
		{`-a`, "invalid character 'a' in numeric literal (expecting digit)", 1},
		{`[-]`, "invalid character ']' in numeric literal (expecting digit)", 2},
		{`1.`, "unexpected end of input", 2},
		{`[1.]`, "invalid character ']' in numeric literal (expecting digit after '.')", 3},
		{`.5`, "invalid character '.' looking for beginning of value", 0},
		{`+1`, "invalid character '+' looking for beginning of value", 0},
		{`1e`, "unexpected end of input", 2},
		{`[1e]`, "invalid character ']' in numeric literal (expecting digit in exponent)", 3},
		{`[1e+]`, "invalid character ']' in numeric literal (expecting digit in exponent)", 4},
		{`1 2`, "trailing data after the JSON value", 2},
		{`{} x`, "trailing data after the JSON value", 3},
		{`[1]]`, "trailing data after the JSON value", 3},
		{`1x`, "trailing data after the JSON value", 1},
		{`tru`, "unexpected end of input", 3},
		{`trux`, "invalid character 'x' in literal true (expecting 'e')", 3},
		{`nul`, "unexpected end of input", 3},
		{`fals`, "unexpected end of input", 4},
		{`nulL`, "invalid character 'L' in literal null (expecting 'l')", 3},
		{`[`, "unexpected end of input", 1},
		{`[1`, "unexpected end of input", 2},
		{`[1,`, "unexpected end of input", 3},
		{`[1,]`, "invalid character ']' looking for beginning of value", 3},
		{`[1 2]`, "invalid character '2' after array element", 3},
		{`[1}`, "invalid character '}' after array element", 2},
		{`{`, "unexpected end of input", 1},
		{`{"a"`, "unexpected end of input", 4},
		{`{"a":`, "unexpected end of input", 5},
		{`{"a":1`, "unexpected end of input", 6},
		{`{"a" 1}`, "invalid character '1' after object key", 5},
		{`{"a":1 "b":2}`, "invalid character '\"' after object key:value pair", 7},
		{`{"a":1,}`, "invalid character '}' looking for beginning of object key string", 7},
		{`{1:2}`, "invalid character '1' looking for beginning of object key string", 1},
		{`{'a':1}`, `invalid character '\'' looking for beginning of object key string`, 1},
		{`{"a":1]`, "invalid character ']' after object key:value pair", 6},
		{`"abc`, "unexpected end of input", 4},
		{"\"a\x01\"", `invalid character '\x01' in string literal (control characters must be escaped)`, 2},
		{"\"a\nb\"", `invalid character '\n' in string literal (control characters must be escaped)`, 2},
		{"\"a\tb\"", `invalid character '\t' in string literal (control characters must be escaped)`, 2},
		{"\"\x00\"", `invalid character '\x00' in string literal (control characters must be escaped)`, 1},
		{`"\x"`, "invalid character 'x' in string escape code", 2},
		{`"\'"`, `invalid character '\'' in string escape code`, 2},
		{`"\u12"`, `invalid character '"' in \u hexadecimal character escape`, 5},
		{`"\u12g4"`, `invalid character 'g' in \u hexadecimal character escape`, 5},
		{`"\`, "unexpected end of input", 2},
		{`"\ud800"`, `lone surrogate escape \ud800`, 1},
		{`"\uD800"`, `lone surrogate escape \uD800`, 1},
		{`"\udc00"`, `lone surrogate escape \udc00`, 1},
		{`"\udfff\ud800"`, `lone surrogate escape \udfff`, 1},
		{`"\ud800\u0041"`, `lone surrogate escape \ud800`, 1},
		{`"\ud800\ud800"`, `lone surrogate escape \ud800`, 1},
		{`"\ud800x"`, `lone surrogate escape \ud800`, 1},
		{`"\ud800\n"`, `lone surrogate escape \ud800`, 1},
		{`"\ud800`, "unexpected end of input", 7},
		{"\"\xff\"", "invalid UTF-8", 1},
		{"\"a\xc3\"", "invalid UTF-8", 2},
		{"\"\xed\xa0\x80\"", "invalid UTF-8", 1}, // UTF-8 encoded surrogate
		{"\"\xc0\xaf\"", "invalid UTF-8", 1},     // overlong
		{"{\"\xff\":1}", "invalid UTF-8", 2},
		{"{\"k\xe2\x82\":1}", "invalid UTF-8", 3},
		{"\xff", "invalid UTF-8 looking for beginning of value", 0},
		{"é", "invalid character 'é' looking for beginning of value", 0},
		{"\ufeff1", `invalid character '\ufeff' looking for beginning of value`, 0}, // BOM: not allowed
		{`[1,2]x`, "trailing data after the JSON value", 5},
		{`NaN`, "invalid character 'N' looking for beginning of value", 0},
		{`[Infinity]`, "invalid character 'I' looking for beginning of value", 1},
	}
	for _, tc := range tests {
		err := jsonscan.Valid([]byte(tc.doc))
		var se *jsonscan.SyntaxError
		if !errors.As(err, &se) {
			t.Errorf("Valid(%q) = %v, want SyntaxError %q", tc.doc, err, tc.msg)
			continue
		}
		if se.Msg != tc.msg || se.Offset != tc.off {
			t.Errorf("Valid(%q) = %q at %d, want %q at %d", tc.doc, se.Msg, se.Offset, tc.msg, tc.off)
		}
		if want := fmt.Sprintf("%s at offset %d", tc.msg, tc.off); err.Error() != want {
			t.Errorf("Valid(%q).Error() = %q, want %q", tc.doc, err.Error(), want)
		}
		if errors.Is(err, jsonscan.ErrTooDeep) {
			t.Errorf("Valid(%q) matches ErrTooDeep", tc.doc)
		}
	}
}

func TestDepth(t *testing.T) {
	nest := func(n int) []byte { return []byte(strings.Repeat("[", n) + strings.Repeat("]", n)) }
	nestObj := func(n int) []byte { return []byte(strings.Repeat(`{"a":`, n) + "1" + strings.Repeat("}", n)) }

	if err := jsonscan.Valid(nest(jsonscan.DefaultMaxDepth)); err != nil {
		t.Fatalf("depth %d: %v", jsonscan.DefaultMaxDepth, err)
	}
	if err := jsonscan.Valid(nestObj(jsonscan.DefaultMaxDepth)); err != nil {
		t.Fatalf("object depth %d: %v", jsonscan.DefaultMaxDepth, err)
	}
	for _, doc := range [][]byte{nest(jsonscan.DefaultMaxDepth + 1), nestObj(jsonscan.DefaultMaxDepth + 1), nest(100000),
		[]byte(strings.Repeat("[", 100000)), []byte(strings.Repeat(`{"":`, 100000))} {
		err := jsonscan.Valid(doc)
		if !errors.Is(err, jsonscan.ErrTooDeep) {
			t.Fatalf("deep document: err = %v, want ErrTooDeep", err)
		}
		var se *jsonscan.SyntaxError
		if !errors.As(err, &se) || se.Msg != "nesting deeper than 1000 levels" {
			t.Fatalf("deep document: err = %v", err)
		}
	}

	var s jsonscan.Scanner
	s.SetMaxDepth(5000)
	s.Reset(nest(5000))
	if err := drain(&s); err != nil {
		t.Fatalf("SetMaxDepth(5000), depth 5000: %v", err)
	}
	s.Reset(nest(5001))
	if err := drain(&s); !errors.Is(err, jsonscan.ErrTooDeep) || err.Error() != "nesting deeper than 5000 levels at offset 5000" {
		t.Fatalf("SetMaxDepth(5000), depth 5001: %v", err)
	}
	s.SetMaxDepth(jsonscan.MaxDepth)
	s.Reset(nest(jsonscan.MaxDepth))
	if err := drain(&s); err != nil {
		t.Fatalf("SetMaxDepth(MaxDepth), depth MaxDepth: %v", err)
	}
	s.Reset(nest(jsonscan.MaxDepth + 1))
	if err := drain(&s); !errors.Is(err, jsonscan.ErrTooDeep) {
		t.Fatalf("SetMaxDepth(MaxDepth), depth MaxDepth+1: %v", err)
	}
}

func drain(s *jsonscan.Scanner) error {
	for {
		t, err := s.Next()
		if err != nil {
			return err
		}
		if t.Kind == jsonscan.EOF {
			return nil
		}
	}
}

type tok struct {
	Kind  jsonscan.Kind
	Raw   string
	Depth int
}

func tokens(t *testing.T, doc string) []tok {
	t.Helper()
	var s jsonscan.Scanner
	s.Reset([]byte(doc))
	var out []tok
	for {
		tk, err := s.Next()
		if err != nil {
			t.Fatalf("tokens(%q): %v", doc, err)
		}
		out = append(out, tok{tk.Kind, string(tk.Raw), int(tk.Depth)})
		if tk.Kind == jsonscan.EOF {
			return out
		}
	}
}

func TestTokens(t *testing.T) {
	got := tokens(t, ` {"a" : [1, "x\n", {"b":true}], "c":null, "d":-1.5e3} `)
	J := jsonscan.ObjectStart
	want := []tok{
		{J, "{", 0},
		{jsonscan.Name, `"a"`, 1},
		{jsonscan.ArrayStart, "[", 1},
		{jsonscan.Number, "1", 2},
		{jsonscan.String, `"x\n"`, 2},
		{jsonscan.ObjectStart, "{", 2},
		{jsonscan.Name, `"b"`, 3},
		{jsonscan.True, "true", 3},
		{jsonscan.ObjectEnd, "}", 2},
		{jsonscan.ArrayEnd, "]", 1},
		{jsonscan.Name, `"c"`, 1},
		{jsonscan.Null, "null", 1},
		{jsonscan.Name, `"d"`, 1},
		{jsonscan.Number, "-1.5e3", 1},
		{jsonscan.ObjectEnd, "}", 0},
		{jsonscan.EOF, "", 0},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("tokens:\n got %v\nwant %v", got, want)
	}
	if got := tokens(t, `"s"`); len(got) != 2 || got[0].Kind != jsonscan.String || got[1].Kind != jsonscan.EOF {
		t.Fatalf("scalar document: %v", got)
	}

	// EOF keeps coming; errors are sticky.
	var s jsonscan.Scanner
	s.Reset([]byte(`1`))
	for range 3 {
		drain(&s)
	}
	if tk, err := s.Next(); err != nil || tk.Kind != jsonscan.EOF {
		t.Fatalf("after EOF: %v %v", tk, err)
	}
	s.Reset([]byte(`[1,]`))
	err1 := drain(&s)
	if _, err2 := s.Next(); err1 == nil || err2 != err1 {
		t.Fatalf("errors not sticky: %v, %v", err1, err2)
	}
	// Reset clears the error.
	s.Reset([]byte(`[1]`))
	if err := drain(&s); err != nil {
		t.Fatalf("after Reset: %v", err)
	}
}

func TestSkipValue(t *testing.T) {
	doc := []byte(`{"skip":{"x":[1,2,{"y":3}]},"keep":1,"arr":[[1],[2]],"s":"v","last":{}}`)
	var s jsonscan.Scanner
	s.Reset(doc)
	var names []string
	for {
		tk, err := s.Next()
		if err != nil {
			t.Fatal(err)
		}
		if tk.Kind == jsonscan.EOF {
			break
		}
		if tk.Kind == jsonscan.Name {
			names = append(names, string(tk.Raw))
			if !jsonscan.EqualName(tk.Raw, "keep") {
				if err := s.SkipValue(); err != nil {
					t.Fatal(err)
				}
				continue
			}
			v, _ := s.Next()
			if string(v.Raw) != "1" {
				t.Fatalf("keep = %q", v.Raw)
			}
		}
	}
	if got := strings.Join(names, ","); got != `"skip","keep","arr","s","last"` {
		t.Fatalf("names = %s", got)
	}

	// After ArrayStart/ObjectStart: skip to the matching end.
	s.Reset([]byte(`[[1,[2]],3]`))
	s.Next() // [
	s.Next() // [ inner
	if err := s.SkipValue(); err != nil {
		t.Fatal(err)
	}
	if tk, _ := s.Next(); string(tk.Raw) != "3" || tk.Depth != 1 {
		t.Fatalf("after skipping inner array: %+v", tk)
	}
	s.Reset([]byte(`{"a":[1,2]} `))
	s.Next()
	if err := s.SkipValue(); err != nil {
		t.Fatal(err)
	}
	if tk, err := s.Next(); err != nil || tk.Kind != jsonscan.EOF {
		t.Fatalf("after skipping root: %+v %v", tk, err)
	}
	// Skipping validates.
	s.Reset([]byte(`{"a":[1,2,}`))
	s.Next()
	s.Next()
	if err := s.SkipValue(); err == nil {
		t.Fatal("SkipValue over invalid value: no error")
	}
	// Misuse.
	s.Reset([]byte(`[1,2]`))
	if err := s.SkipValue(); err == nil {
		t.Fatal("SkipValue before any token: no error")
	}
	s.Next()
	s.Next()
	if err := s.SkipValue(); err == nil {
		t.Fatal("SkipValue after a scalar: no error")
	}
}

func TestUnescapeAndEqualName(t *testing.T) {
	tests := []struct{ raw, want string }{
		{`""`, ""},
		{`"plain"`, "plain"},
		{`"\"\\\/\b\f\n\r\t"`, "\"\\/\b\f\n\r\t"},
		{`"\u0041\u00e9\u2028\uFFFF"`, "Aé\u2028\uffff"},
		{`"\ud83d\ude00 x"`, "😀 x"},
		{`"a\u0000b"`, "a\x00b"},
		{`"é✨"`, "é✨"},
	}
	for _, tc := range tests {
		if err := jsonscan.Valid([]byte(tc.raw)); err != nil {
			t.Fatalf("%s: %v", tc.raw, err)
		}
		got := string(jsonscan.AppendUnescaped([]byte("pre:"), []byte(tc.raw)))
		if got != "pre:"+tc.want {
			t.Errorf("AppendUnescaped(%s) = %q, want %q", tc.raw, got, "pre:"+tc.want)
		}
		if !jsonscan.EqualName([]byte(tc.raw), tc.want) {
			t.Errorf("EqualName(%s, %q) = false", tc.raw, tc.want)
		}
		for _, other := range []string{tc.want + "x", "x" + tc.want, strings.TrimSuffix(tc.want, "x")[:max(0, len(tc.want)-1)]} {
			if other != tc.want && jsonscan.EqualName([]byte(tc.raw), other) {
				t.Errorf("EqualName(%s, %q) = true", tc.raw, other)
			}
		}
	}
	if jsonscan.EqualName([]byte(`"\u0041"`), "B") || !jsonscan.EqualName([]byte(`"\u0041"`), "A") {
		t.Error("EqualName with escape")
	}
}

func TestIsInteger(t *testing.T) {
	for num, want := range map[string]bool{"0": true, "-0": true, "123": true, "1.0": false, "1e5": false, "1E5": false, "-1.5e-3": false} {
		if got := jsonscan.IsInteger([]byte(num)); got != want {
			t.Errorf("IsInteger(%s) = %v", num, got)
		}
	}
}

func realisticDoc(tb testing.TB) []byte {
	path := filepath.Join("..", "..", "..", "shared", "corpus", "github", "push", "payload.json")
	if b, err := os.ReadFile(path); err == nil {
		return b
	}
	// Fallback: a synthetic document of similar shape.
	var b bytes.Buffer
	b.WriteString(`{"ref":"refs/heads/main","commits":[`)
	for i := range 50 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":"%040d","message":"fix \"bug\" #%d\nmore é ✨","timestamp":"2024-01-01T00:00:00Z","distinct":true,"added":[],"removed":null,"score":%d.5e-3}`, i, i, i)
	}
	b.WriteString(`],"repository":{"id":123456,"name":"x","owner":{"login":"octocat","site_admin":false}}}`)
	return b.Bytes()
}

func TestZeroAllocs(t *testing.T) {
	doc := realisticDoc(t)
	var s jsonscan.Scanner
	s.Reset(doc)
	if err := drain(&s); err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(20, func() {
		s.Reset(doc)
		if err := drain(&s); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("scanning a %d-byte document: %v allocs per run, want 0", len(doc), allocs)
	}
	allocs = testing.AllocsPerRun(20, func() {
		if err := jsonscan.Valid(doc); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("Valid: %v allocs per run, want 0", allocs)
	}
	var buf []byte
	name := []byte(`"caf\u00e9 \ud83d\ude00"`)
	allocs = testing.AllocsPerRun(20, func() {
		buf = jsonscan.AppendUnescaped(buf[:0], name)
		if !jsonscan.EqualName(name, "café 😀") {
			t.Fatal("EqualName")
		}
	})
	if allocs != 0 {
		t.Fatalf("AppendUnescaped/EqualName: %v allocs per run, want 0", allocs)
	}
}

func BenchmarkScan(b *testing.B) {
	doc := realisticDoc(b)
	var s jsonscan.Scanner
	b.ReportAllocs()
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		s.Reset(doc)
		if err := drain(&s); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodingJSONValid(b *testing.B) {
	doc := realisticDoc(b)
	b.ReportAllocs()
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		if !json.Valid(doc) {
			b.Fatal("invalid")
		}
	}
}

// skipWalk reads data token by token down to depth skipAt and skips every container that opens there, the way the
// keys package walks a body for one member; it returns the scan's error, or nil once it reached EOF.
func skipWalk(data []byte, skipAt int) error {
	var s jsonscan.Scanner
	s.Reset(data)
	for {
		t, err := s.Next()
		if err != nil {
			return err
		}
		switch {
		case t.Kind == jsonscan.EOF:
			return nil
		case (t.Kind == jsonscan.ObjectStart || t.Kind == jsonscan.ArrayStart) && int(t.Depth) == skipAt:
			if err := s.SkipValue(); err != nil {
				return err
			}
		}
	}
}

// surrogateEscape matches anything that might be a \u escape of a surrogate; encoding/json accepts lone ones.
var surrogateEscape = regexp.MustCompile(`(?i)\\u[dD][89a-fA-F]`)

func FuzzScanner(f *testing.F) {
	seeds := []string{
		``, ` `, `0`, `-0`, `01`, `1.`, `.5`, `1e`, `1e+5`, `"\ud83d\ude00"`, `"\ud800"`, `"\udc00"`, `"\ud800\u0041"`,
		`{"a":[1,2,{"b":null}],"c":"d"}`, `[1,]`, `{"a":1,}`, "\"\xff\"", `"\u00e9"`, `[[[[[]]]]]`, `{"a" 1}`, `1 2`,
		`true`, `fals`, `"a\"b\\c\/d\be\ff\ng\rh\ti"`, `[-1.5e-3, 0.0, 1E400]`,
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Add(realisticDoc(f))
	f.Fuzz(func(t *testing.T, data []byte) {
		var s jsonscan.Scanner
		s.Reset(data)
		var err error
		depth := 0
		maxDepth := 0
		for {
			var tk jsonscan.Token
			tk, err = s.Next()
			if err != nil {
				var se *jsonscan.SyntaxError
				if !errors.As(err, &se) || se.Offset < 0 || se.Offset > len(data) {
					t.Fatalf("bad error %#v", err)
				}
				break
			}
			if tk.Kind == jsonscan.EOF {
				if depth != 0 {
					t.Fatalf("EOF at depth %d", depth)
				}
				break
			}
			switch tk.Kind {
			case jsonscan.ObjectStart, jsonscan.ArrayStart:
				if int(tk.Depth) != depth {
					t.Fatalf("start depth %d, want %d", tk.Depth, depth)
				}
				depth++
				maxDepth = max(maxDepth, depth)
			case jsonscan.ObjectEnd, jsonscan.ArrayEnd:
				depth--
				if int(tk.Depth) != depth {
					t.Fatalf("end depth %d, want %d", tk.Depth, depth)
				}
			case jsonscan.Name, jsonscan.String:
				u := jsonscan.AppendUnescaped(nil, tk.Raw)
				if !utf8.Valid(u) {
					t.Fatalf("unescaped %q is not UTF-8", tk.Raw)
				}
				if !jsonscan.EqualName(tk.Raw, string(u)) {
					t.Fatalf("EqualName(%q, %q) = false", tk.Raw, u)
				}
				// The decoded token must survive encoding/json too.
				var js string
				if e := json.Unmarshal(tk.Raw, &js); e != nil || js != string(u) {
					t.Fatalf("encoding/json decodes %q as %q (%v), we as %q", tk.Raw, js, e, u)
				}
			}
		}
		if errors.Is(err, jsonscan.ErrTooDeep) && maxDepth != jsonscan.DefaultMaxDepth {
			t.Fatalf("ErrTooDeep at depth %d", maxDepth)
		}
		// Valid and SkipValue take a token-free path; it must end exactly where and as the token loop does.
		if verr := jsonscan.Valid(data); fmt.Sprint(verr) != fmt.Sprint(err) {
			t.Fatalf("Valid = %v, scanner = %v", verr, err)
		}
		for _, skipAt := range []int{0, 1, 2} {
			if serr := skipWalk(data, skipAt); fmt.Sprint(serr) != fmt.Sprint(err) {
				t.Fatalf("skipping below depth %d: %v, scanner = %v", skipAt, serr, err)
			}
		}
		if !utf8.Valid(data) || surrogateEscape.Match(data) || bytes.Count(data, []byte("["))+
			bytes.Count(data, []byte("{")) >= jsonscan.DefaultMaxDepth {
			return
		}
		if got, want := err == nil, json.Valid(data); got != want {
			t.Fatalf("jsonscan valid = %v (%v), encoding/json valid = %v for %q", got, err, want, data)
		}
	})
}
