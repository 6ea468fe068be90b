package hashing_test

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/dedupeworker/dedupeworker/hashing"
	"github.com/dedupeworker/dedupeworker/internal/jsonscan"
)

func mustNew(t testing.TB, opts hashing.Options) *hashing.Hasher {
	t.Helper()
	h, err := hashing.New(opts)
	if err != nil {
		t.Fatalf("New(%+v): %v", opts, err)
	}
	return h
}

// canon returns the canonical stream and checks that Digest is its SHA-256.
func canon(t testing.TB, h *hashing.Hasher, raw string) string {
	t.Helper()
	var b bytes.Buffer
	if err := h.Canonical(&b, []byte(raw)); err != nil {
		t.Fatalf("Canonical(%q): %v", raw, err)
	}
	d, err := h.Digest([]byte(raw))
	if err != nil {
		t.Fatalf("Digest(%q): %v", raw, err)
	}
	if sum := sha256.Sum256(b.Bytes()); hex.EncodeToString(sum[:]) != d {
		t.Fatalf("Digest(%q) = %s is not the SHA-256 of the canonical stream %q", raw, d, b.String())
	}
	return b.String()
}

// stringList accepts a path or a list of paths.
type stringList []string

func (l *stringList) UnmarshalJSON(b []byte) error {
	var one string
	if err := json.Unmarshal(b, &one); err == nil {
		*l = []string{one}
		return nil
	}
	return json.Unmarshal(b, (*[]string)(l))
}

func TestPinnedVectors(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "zizq-pinned.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	n := 0
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		n++
		var v struct {
			From      string          `json:"from"`
			Type      string          `json:"type"`
			Payload   json.RawMessage `json:"payload"`
			Canonical *string         `json:"canonical"`
			Digest    string          `json:"digest"`
			Key       string          `json:"key"`
			Only      *stringList     `json:"only"`
			Except    *stringList     `json:"except"`
		}
		if err := json.Unmarshal(line, &v); err != nil {
			t.Fatalf("line %d: %v", n, err)
		}
		t.Run(strings.ReplaceAll(v.From, " ", "_"), func(t *testing.T) {
			var opts hashing.Options
			if v.Only != nil {
				opts.Only = []string(*v.Only)
				if opts.Only == nil {
					opts.Only = []string{}
				}
			}
			if v.Except != nil {
				opts.Except = []string(*v.Except)
			}
			h := mustNew(t, opts)
			got := canon(t, h, string(v.Payload))
			if v.Canonical != nil && got != *v.Canonical {
				t.Errorf("line %d: canonical %q, want %q", n, got, *v.Canonical)
			}
			if v.Digest != "" {
				if d, _ := h.Digest(v.Payload); d != v.Digest {
					t.Errorf("line %d: digest %s, want %s", n, d, v.Digest)
				}
			}
			if v.Key != "" {
				if k, err := h.Key(v.Type, v.Payload); err != nil || k != v.Key {
					t.Errorf("line %d: key %s (%v), want %s", n, k, err, v.Key)
				}
			}
		})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no vectors")
	}
}

func TestCanonicalForm(t *testing.T) {
	h := mustNew(t, hashing.Options{})
	tests := []struct{ name, in, want string }{
		{"empty object", `{}`, `{}`},
		{"empty array", `[]`, `[]`},
		{"whitespace ignored", " {\n\t\"a\" : [ 1 , 2 ] ,\r\n \"b\" : { } } ", `{"a":[1,2,],"b":{},}`},
		{"literals", `[true,false,null]`, `[true,false,null,]`},
		{"nested", `{"z":{"y":[{"b":1,"a":2}]},"a":0}`, `{"a":0,"z":{"y":[{"a":2,"b":1,},],},}`},
		{"scalar root", `"x"`, `"x"`},

		// Key order: raw UTF-8 bytes of the decoded name.
		{"prefix names", `{"b":1,"ab":2,"a":3}`, `{"a":3,"ab":2,"b":1,}`},
		{"non-ASCII names", `{"é":1,"z":2,"É":3,"😀":4,"\u007f":5,"A":6,"":7,"\uffff":8}`,
			"{\"\":7,\"A\":6,\"z\":2,\"\x7f\":5,\"É\":3,\"é\":1,\"\uffff\":8,\"😀\":4,}"},
		{"escaped names sort decoded", `{"\u0062":1,"a":2}`, `{"a":2,"b":1,}`},
		{"name escaping", `{"a\"b":1,"\n":2}`, `{"\n":2,"a\"b":1,}`},

		// Duplicates: the last occurrence wins.
		{"duplicate", `{"a":1,"a":2}`, `{"a":2,}`},
		{"duplicate apart", `{"a":1,"b":0,"a":{"x":3}}`, `{"a":{"x":3,},"b":0,}`},
		{"duplicate escaped", `{"a":1,"\u0061":2}`, `{"a":2,}`},
		{"duplicate escaped first", `{"\u0061":1,"a":2}`, `{"a":2,}`},
		{"duplicate thrice", `{"a":1,"a":2,"a":3}`, `{"a":3,}`},

		// Strings.
		{"control escapes", `"\u0000\u0001\u001f\b\t\n\f\r\u000b\u000e"`, `"\u0000\u0001\u001F\b\t\n\f\r\u000B\u000E"`},
		{"quote and backslash", `"\"\\"`, `"\"\\"`},
		{"slash raw", `"/\/"`, `"//"`},
		{"DEL raw", `"\u007f"`, "\"\x7f\""},
		{"U+2028 U+2029 raw", `"\u2028\u2029"`, "\"\u2028\u2029\""},
		{"html raw", `"<>&\u003c\u003e\u0026"`, `"<>&<>&"`},
		{"escaped non-ASCII decoded", `"\u00e9"`, `"é"`},
		{"raw non-ASCII", `"é✨"`, `"é✨"`},
		{"surrogate pair", `"\ud83d\ude00"`, `"😀"`},
		{"uppercase hex input", `"\u00E9\u001F"`, `"é\u001F"`},
		{"long escaped string", `"` + strings.Repeat(`a\n`, 5000) + `"`, `"` + strings.Repeat(`a\n`, 5000) + `"`},

		// Integers: exact, any size; -0 is 0.
		{"zero", `0`, `0`},
		{"minus zero", `-0`, `0`},
		{"negative", `-42`, `-42`},
		{"100 digits", strings.Repeat("9", 100), strings.Repeat("9", 100)},
		{"negative big", "-" + strings.Repeat("1234567890", 10), "-" + strings.Repeat("1234567890", 10)},
		{"2^64", `18446744073709551616`, `18446744073709551616`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := canon(t, h, tc.in); got != tc.want {
				t.Errorf("canonical(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

func TestFloatForms(t *testing.T) {
	h := mustNew(t, hashing.Options{})
	tests := []struct{ in, want string }{
		{`1.0`, `1.0`},
		{`-0.0`, `-0.0`},
		{`0.0`, `0.0`},
		{`0e0`, `0.0`},
		{`-0e5`, `-0.0`},
		{`0.1`, `0.1`},
		{`100.0`, `100.0`},
		{`1e2`, `100.0`},
		{`1000.0`, `1.0e3`},
		{`1e3`, `1.0e3`},
		{`1E3`, `1.0e3`},
		{`1234.0`, `1234.0`},
		{`10000.0`, `1.0e4`},
		{`0.0001`, `0.0001`},
		{`1e-4`, `0.0001`},
		{`0.00001`, `1.0e-5`},
		{`1.5e-7`, `1.5e-7`},
		{`0.00000015`, `1.5e-7`},
		{`9007199254740991.0`, `9007199254740991.0`},
		{`9007199254740992.0`, `9.007199254740992e15`},
		{`-9007199254740992.0`, `-9.007199254740992e15`},
		{`12345678.9`, `12345678.9`},
		{`1e21`, `1.0e21`},
		{`1e+21`, `1.0e21`},
		{`2.5e15`, `2.5e15`},
		{`123.456`, `123.456`},
		{`-1.5`, `-1.5`},
		{`0.30000000000000004`, `0.30000000000000004`},
		{`0.1e1`, `1.0`},
		{`5e-324`, `5.0e-324`},
		{`1.7976931348623157e308`, `1.7976931348623157e308`},
		{`123456789012345678901234567890.0`, `1.2345678901234568e29`},
		{`1e-400`, `0.0`}, // underflow rounds to zero, as strtod does
	}
	for _, tc := range tests {
		if got := canon(t, h, tc.in); got != tc.want {
			t.Errorf("float %s: canonical %q, want %q", tc.in, got, tc.want)
		}
		if got := canon(t, h, "["+tc.in+"]"); got != "["+tc.want+",]" {
			t.Errorf("float %s in array: canonical %q", tc.in, got)
		}
	}
	// 1 and 1.0 differ, as in Elixir.
	a, _ := h.Digest([]byte(`{"n":1}`))
	b, _ := h.Digest([]byte(`{"n":1.0}`))
	if a == b {
		t.Error("1 and 1.0 hash the same")
	}
}

func TestOnly(t *testing.T) {
	doc := `{"user":{"id":7,"name":"x","tags":["a","b"]},"items":[7,8,9],"n":null,"s":"str","dotted.key":1,` +
		`"arr":[{"a":1,"b":2},{"a":3,"b":4}],"dup":1,"dup":{"x":2}}`
	tests := []struct {
		name string
		only []string
		want string
	}{
		{"nested member", []string{".user.id"}, `{"user":{"id":7,},}`},
		{"gap padding", []string{".items[1]"}, `{"items":[null,8,],}`},
		{"gaps either order", []string{".items[2]", ".items[0]"}, `{"items":[7,null,9,],}`},
		{"gaps other order", []string{".items[0]", ".items[2]"}, `{"items":[7,null,9,],}`},
		{"merge siblings", []string{".user.id", ".user.name"}, `{"user":{"id":7,"name":"x",},}`},
		{"merge siblings reversed", []string{".user.name", ".user.id"}, `{"user":{"id":7,"name":"x",},}`},
		{"overlap parent first", []string{".user", ".user.id"},
			`{"user":{"id":7,"name":"x","tags":["a","b",],},}`},
		{"overlap child first", []string{".user.id", ".user"},
			`{"user":{"id":7,"name":"x","tags":["a","b",],},}`},
		{"deep array", []string{".user.tags[1]"}, `{"user":{"tags":[null,"b",],},}`},
		{"array of objects", []string{".arr[1].b", ".arr[0].a"}, `{"arr":[{"a":1,},{"b":4,},],}`},
		{"dot alone", []string{"."}, ""},
		{"dot among others", []string{".user.id", ".", ".nope"}, ""},
		{"null value kept", []string{".n"}, `{"n":null,}`},
		{"missing key skipped", []string{".nope", ".s"}, `{"s":"str",}`},
		{"nothing matched", []string{".nope"}, `{}`},
		{"empty only", []string{}, `{}`},
		{"index past end", []string{".items[3]"}, `{}`},
		{"index on object", []string{".user[0]"}, `{}`},
		{"name on array", []string{".items.a"}, `{}`},
		{"name on string", []string{".s.a"}, `{}`},
		{"through null", []string{".n.x"}, `{}`},
		{"quoted key", []string{`.["dotted.key"]`}, `{"dotted.key":1,}`},
		{"dotted is nested", []string{".dotted.key"}, `{}`},
		{"duplicate takes last", []string{".dup"}, `{"dup":{"x":2,},}`},
		{"duplicate walk takes last", []string{".dup.x"}, `{"dup":{"x":2,},}`},
	}
	whole := canon(t, mustNew(t, hashing.Options{}), doc)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			want := tc.want
			if want == "" {
				want = whole
			}
			if got := canon(t, mustNew(t, hashing.Options{Only: tc.only}), doc); got != want {
				t.Errorf("only %q: %s, want %s", tc.only, got, want)
			}
		})
	}

	rootTests := []struct {
		doc  string
		only []string
		want string
	}{
		{`[1,2,3]`, []string{".[1]"}, `[null,2,]`},
		{`[1,2,3]`, []string{".[2]", ".[0]"}, `[1,null,3,]`},
		{`[[1,2],[3]]`, []string{".[1][0]"}, `[null,[3,],]`},
		{`[1,2,3]`, []string{".a"}, `{}`},
		{`"scalar"`, []string{".a"}, `{}`},
		{`"scalar"`, []string{"."}, `"scalar"`},
		{`null`, []string{".a"}, `{}`},
		{`{"a":{"b":[{"c":1}]}}`, []string{".a.b[0].c"}, `{"a":{"b":[{"c":1,},],},}`},
	}
	for _, tc := range rootTests {
		if got := canon(t, mustNew(t, hashing.Options{Only: tc.only}), tc.doc); got != tc.want {
			t.Errorf("only %q on %s: %s, want %s", tc.only, tc.doc, got, tc.want)
		}
	}
	// Pinned: .user.id on the design example.
	if got := canon(t, mustNew(t, hashing.Options{Only: []string{".user.id"}}), `{"user":{"id":7,"name":"x"}}`); got != `{"user":{"id":7,},}` {
		t.Errorf("design example: %s", got)
	}
	if got := canon(t, mustNew(t, hashing.Options{Only: []string{".items[1]"}}), `{"items":[7,7]}`); got != `{"items":[null,7,],}` {
		t.Errorf("design example: %s", got)
	}
}

func TestExcept(t *testing.T) {
	doc := `{"a":1,"b":{"c":2,"d":3},"items":[1,2,3,4],"dup":1,"dup":2,"n":null}`
	tests := []struct {
		name   string
		except []string
		want   string
	}{
		{"member", []string{".a"}, `{"b":{"c":2,"d":3,},"dup":2,"items":[1,2,3,4,],"n":null,}`},
		{"nested", []string{".b.c", ".a", ".items", ".dup", ".n"}, `{"b":{"d":3,},}`},
		{"shift left", []string{".a", ".b", ".dup", ".n", ".items[0]", ".items[0]"}, `{"items":[3,4,],}`},
		{"shift then index", []string{".a", ".b", ".dup", ".n", ".items[1]", ".items[1]"}, `{"items":[1,4,],}`},
		{"last element", []string{".a", ".b", ".dup", ".n", ".items[3]"}, `{"items":[1,2,3,],}`},
		{"missing path", []string{".zzz", ".items[9]", ".a.b", ".b.c.d", ".n.x", ".items.x", ".b[0]"},
			`{"a":1,"b":{"c":2,"d":3,},"dup":2,"items":[1,2,3,4,],"n":null,}`},
		{"dot", []string{"."}, `null`},
		{"dot then more", []string{".", ".a"}, `null`},
		{"more then dot", []string{".a", "."}, `null`},
		{"duplicate removes all", []string{".dup", ".a", ".b", ".items", ".n"}, `{}`},
		{"empty except", []string{}, `{"a":1,"b":{"c":2,"d":3,},"dup":2,"items":[1,2,3,4,],"n":null,}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := canon(t, mustNew(t, hashing.Options{Except: tc.except}), doc); got != tc.want {
				t.Errorf("except %q: %s, want %s", tc.except, got, tc.want)
			}
		})
	}
	if got := canon(t, mustNew(t, hashing.Options{Except: []string{".[0]", ".[1]"}}), `[1,2,3]`); got != `[2,]` {
		t.Errorf("root array: %s", got)
	}
	if got := canon(t, mustNew(t, hashing.Options{Except: []string{".[1].x"}}), `[{"x":1},{"x":2,"y":3}]`); got != `[{"x":1,},{"y":3,},]` {
		t.Errorf("nested in array: %s", got)
	}
}

func TestKeyPrefix(t *testing.T) {
	raw := []byte(`{"user_id":42,"template":"welcome"}`)
	const d = "1f98104cc5a072ae84731379f5888c48c1886f7d58681e806cc9cca4d601f765"
	if k, _ := mustNew(t, hashing.Options{}).Key("send_email", raw); k != "send_email:"+d {
		t.Errorf("key = %s", k)
	}
	yes, no := true, false
	if k, _ := mustNew(t, hashing.Options{Prefix: &yes}).Key("send_email", raw); k != "send_email:"+d {
		t.Errorf("key = %s", k)
	}
	if k, _ := mustNew(t, hashing.Options{Prefix: &no}).Key("send_email", raw); k != d {
		t.Errorf("unprefixed key = %s", k)
	}
	if _, err := mustNew(t, hashing.Options{}).Key("t", []byte(`{`)); err == nil {
		t.Error("Key of invalid JSON: no error")
	}
}

func TestDigestValue(t *testing.T) {
	h := mustNew(t, hashing.Options{})
	d, err := h.DigestValue(map[string]any{"user_id": 42, "template": "welcome"})
	if err != nil || d != "1f98104cc5a072ae84731379f5888c48c1886f7d58681e806cc9cca4d601f765" {
		t.Errorf("DigestValue = %s, %v", d, err)
	}
	// encoding/json escapes <>& but the escapes are decoded again.
	a, _ := h.DigestValue(map[string]string{"s": "<a&b>"})
	b, _ := h.Digest([]byte(`{"s":"<a&b>"}`))
	if a != b {
		t.Error("DigestValue differs from Digest on <>&")
	}
	if _, err := h.DigestValue(make(chan int)); err == nil || !strings.HasPrefix(err.Error(), "hashing: ") {
		t.Errorf("DigestValue(chan) error = %v", err)
	}
}

func TestNewErrors(t *testing.T) {
	_, err := hashing.New(hashing.Options{Only: []string{".a"}, Except: []string{".b"}})
	if err == nil || err.Error() != "hashing: only and except cannot be combined" {
		t.Errorf("only+except: %v", err)
	}
	_, err = hashing.New(hashing.Options{Only: []string{}, Except: []string{}})
	if err == nil {
		t.Error("empty only + empty except: no error")
	}
	_, err = hashing.New(hashing.Options{Only: []string{".a", "b"}})
	if err == nil || err.Error() != `hashing: path "b": must start with '.'` {
		t.Errorf("bad only path: %v", err)
	}
	_, err = hashing.New(hashing.Options{Except: []string{".a[x]"}})
	if err == nil || !strings.Contains(err.Error(), `path ".a[x]": invalid array index`) {
		t.Errorf("bad except path: %v", err)
	}
}

func TestBadInput(t *testing.T) {
	h := mustNew(t, hashing.Options{})
	hOnly := mustNew(t, hashing.Options{Only: []string{".a"}})
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	tests := []struct{ name, in, want string }{
		{"empty", ``, "hashing: invalid JSON: unexpected end of input at offset 0"},
		{"whitespace only", "  \n", "hashing: invalid JSON: unexpected end of input at offset 3"},
		{"truncated", `{"a":`, "hashing: invalid JSON: unexpected end of input at offset 5"},
		{"syntax", `{"a" 1}`, "hashing: invalid JSON: invalid character '1' after object key at offset 5"},
		{"trailing garbage", `{"a":1} x`, "hashing: invalid JSON: trailing data after the JSON value at offset 8"},
		{"two values", `1 2`, "hashing: invalid JSON: trailing data after the JSON value at offset 2"},
		{"invalid UTF-8 in string", "{\"a\":\"\xff\"}", "hashing: invalid JSON: invalid UTF-8 at offset 6"},
		{"invalid UTF-8 in name", "{\"\xc3\":1}", "hashing: invalid JSON: invalid UTF-8 at offset 2"},
		{"UTF-8 surrogate", "\"\xed\xa0\x80\"", "hashing: invalid JSON: invalid UTF-8 at offset 1"},
		{"lone high surrogate", `{"a":"\ud800"}`, `hashing: invalid JSON: lone surrogate escape \ud800 at offset 6`},
		{"lone low surrogate", `"\udc00"`, `hashing: invalid JSON: lone surrogate escape \udc00 at offset 1`},
		{"high then non-low", `"\ud83d\u0041"`, `hashing: invalid JSON: lone surrogate escape \ud83d at offset 1`},
		{"raw control char", "\"a\tb\"", `hashing: invalid JSON: invalid character '\t' in string literal (control characters must be escaped) at offset 2`},
		{"leading zero", `01`, "hashing: invalid JSON: invalid character '1' in numeric literal (leading zero) at offset 1"},
		{"NaN", `NaN`, "hashing: invalid JSON: invalid character 'N' looking for beginning of value at offset 0"},
		{"float overflow", `{"x":1e400}`, "hashing: invalid JSON: number 1e400 at offset 5 overflows float64"},
		{"negative float overflow", `-1.5E+999`, "hashing: invalid JSON: number -1.5E+999 at offset 0 overflows float64"},
		{"long float overflow", "9" + strings.Repeat("0", 400) + ".0",
			"hashing: invalid JSON: number 9000000000000000000000000000000000000... at offset 0 overflows float64"},
		{"too deep", deep(hashing.MaxDepth + 1), "hashing: invalid JSON: nesting deeper than 1000 levels at offset 1000"},
		{"far too deep", deep(100000), "hashing: invalid JSON: nesting deeper than 1000 levels at offset 1000"},
		{"far too deep unclosed", strings.Repeat(`{"a":`, 100000), "hashing: invalid JSON: nesting deeper than 1000 levels at offset 5000"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, hh := range []*hashing.Hasher{h, hOnly} {
				d, err := hh.Digest([]byte(tc.in))
				if err == nil || err.Error() != tc.want {
					t.Fatalf("Digest = %q, %v; want error %q", d, err, tc.want)
				}
				var b bytes.Buffer
				if err := hh.Canonical(&b, []byte(tc.in)); err == nil || b.Len() != 0 {
					t.Fatalf("Canonical wrote %q, err %v", b.String(), err)
				}
			}
		})
	}
	if _, err := h.Digest([]byte(deep(hashing.MaxDepth))); err != nil {
		t.Errorf("depth %d: %v", hashing.MaxDepth, err)
	}
	_, err := h.Digest([]byte(deep(5000)))
	if !errors.Is(err, jsonscan.ErrTooDeep) {
		t.Errorf("too deep: errors.Is(ErrTooDeep) false: %v", err)
	}
	var se *jsonscan.SyntaxError
	if _, err := h.Digest([]byte(`[1,]`)); !errors.As(err, &se) || se.Offset != 3 {
		t.Errorf("syntax error not unwrappable: %v", err)
	}
}

// encoding/json alone gets these wrong; make sure we do not.
func TestNotEncodingJSON(t *testing.T) {
	h := mustNew(t, hashing.Options{})
	if got := canon(t, h, `{"n":12345678901234567890123,"f":1.0,"s":"<&>"}`); got != `{"f":1.0,"n":12345678901234567890123,"s":"<&>",}` {
		t.Errorf("got %s", got)
	}
	var v any
	if json.Unmarshal([]byte("\"\xff\""), &v) != nil {
		t.Skip("encoding/json now rejects invalid UTF-8")
	}
	if _, err := h.Digest([]byte("\"\xff\"")); err == nil {
		t.Error("invalid UTF-8 accepted")
	}
}

type failWriter struct{ n int }

func (w *failWriter) Write(p []byte) (int, error) {
	if w.n -= len(p); w.n < 0 {
		return 0, errors.New("disk full")
	}
	return len(p), nil
}

func TestCanonicalWriteError(t *testing.T) {
	h := mustNew(t, hashing.Options{})
	big := `["` + strings.Repeat("x", 10000) + `"]`
	for _, limit := range []int{0, 100, 5000} {
		err := h.Canonical(&failWriter{n: limit}, []byte(big))
		if err == nil || err.Error() != "hashing: writing canonical form: disk full" {
			t.Errorf("limit %d: %v", limit, err)
		}
	}
}

func TestLargePayloadStreams(t *testing.T) {
	body := generated(1 << 20)
	for _, opts := range []hashing.Options{{}, {Only: []string{".[3]", ".[100].s"}}, {Except: []string{".[0]", ".[5].o"}}} {
		h := mustNew(t, opts)
		got := canon(t, h, string(body)) // checks Digest == sha256(Canonical)
		if len(opts.Only) == 0 && len(opts.Except) == 0 {
			want, err := naiveDigest(body)
			if err != nil {
				t.Fatal(err)
			}
			if d, _ := h.Digest(body); d != want {
				t.Errorf("1 MiB digest %s, naive %s", d, want)
			}
			if len(got) < 1<<19 {
				t.Errorf("canonical form suspiciously short: %d bytes", len(got))
			}
		}
	}
}

func TestConcurrent(t *testing.T) {
	h := mustNew(t, hashing.Options{Except: []string{".b"}})
	docs := []string{`{"a":1,"b":2}`, `[1,2,3]`, `{"x":{"y":[1.5,"é"]}}`, string(generated(64 << 10))}
	want := make([]string, len(docs))
	for i, d := range docs {
		want[i], _ = h.Digest([]byte(d))
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				k := (g + i) % len(docs)
				if got, err := h.Digest([]byte(docs[k])); err != nil || got != want[k] {
					t.Errorf("concurrent digest %d: %s %v", k, got, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestReorderAndWhitespace(t *testing.T) {
	h := mustNew(t, hashing.Options{})
	docs := []string{
		`{"b":[1,{"y":2,"x":1.5}],"a":"é\n","c":{"z":null,"y":true}}`,
		`{"a":1,"a":2,"b":{"c":3,"c":4}}`,
	}
	for _, d := range docs {
		checkInvariants(t, h, []byte(d))
	}
}

func TestSteps(t *testing.T) {
	p, err := hashing.ParsePath(`.a[1]["x.y"]`)
	if err != nil {
		t.Fatal(err)
	}
	want := []hashing.Step{{Name: "a"}, {Index: 1, IsIndex: true}, {Name: "x.y"}}
	if got := p.Steps(); !reflect.DeepEqual(got, want) {
		t.Errorf("Steps = %+v", got)
	}
	p.Steps()[0].Name = "mutated"
	if p.Steps()[0].Name != "a" {
		t.Error("Steps is not a copy")
	}
}

func TestParsePath(t *testing.T) {
	tests := []struct {
		in    string
		steps []hashing.Step
		str   string
	}{
		{".", nil, "."},
		{"..", nil, "."},
		{".user_id", []hashing.Step{{Name: "user_id"}}, ".user_id"},
		{"._", []hashing.Step{{Name: "_"}}, "._"},
		{".user.id", []hashing.Step{{Name: "user"}, {Name: "id"}}, ".user.id"},
		{".a..b", []hashing.Step{{Name: "a"}, {Name: "b"}}, ".a.b"},
		{".a.", []hashing.Step{{Name: "a"}}, ".a"},
		{".items[0]", []hashing.Step{{Name: "items"}, {Index: 0, IsIndex: true}}, ".items[0]"},
		{".items.[0]", []hashing.Step{{Name: "items"}, {Index: 0, IsIndex: true}}, ".items[0]"},
		{".[0]", []hashing.Step{{Index: 0, IsIndex: true}}, ".[0]"},
		{".[12][007]", []hashing.Step{{Index: 12, IsIndex: true}, {Index: 7, IsIndex: true}}, ".[12][7]"},
		{".a[0]b", []hashing.Step{{Name: "a"}, {Index: 0, IsIndex: true}, {Name: "b"}}, ".a[0].b"},
		{`.["dotted.key"]`, []hashing.Step{{Name: "dotted.key"}}, `.["dotted.key"]`},
		{`.a["b c"].d`, []hashing.Step{{Name: "a"}, {Name: "b c"}, {Name: "d"}}, `.a["b c"].d`},
		{`.["plain"]`, []hashing.Step{{Name: "plain"}}, `.plain`},
		{`.[""]`, []hashing.Step{{Name: ""}}, `.[""]`},
		{`.["a\"]b"]`, []hashing.Step{{Name: `a"]b`}}, `.["a\"]b"]`},
		{`.["a\\b"]`, []hashing.Step{{Name: `a\b`}}, `.["a\\b"]`},
		{`.["\x"]`, []hashing.Step{{Name: `x`}}, `.x`},
		{`.["a"b"]`, []hashing.Step{{Name: `a"b`}}, `.["a\"b"]`},
		{`.["é"]`, []hashing.Step{{Name: "é"}}, `.["é"]`},
		{`.["9"]`, []hashing.Step{{Name: "9"}}, `.["9"]`},
		{`.A9_z`, []hashing.Step{{Name: "A9_z"}}, `.A9_z`},
	}
	for _, tc := range tests {
		p, err := hashing.ParsePath(tc.in)
		if err != nil {
			t.Errorf("ParsePath(%q): %v", tc.in, err)
			continue
		}
		if got := p.Steps(); !reflect.DeepEqual(got, tc.steps) {
			t.Errorf("ParsePath(%q).Steps() = %+v, want %+v", tc.in, got, tc.steps)
		}
		if got := p.String(); got != tc.str {
			t.Errorf("ParsePath(%q).String() = %q, want %q", tc.in, got, tc.str)
		}
	}
	if (hashing.Path{}).String() != "." {
		t.Error("zero Path is not .")
	}
}

func TestParsePathErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", `hashing: path "": must start with '.'`},
		{"a", `hashing: path "a": must start with '.'`},
		{" .a", `hashing: path " .a": must start with '.'`},
		{"[0]", `hashing: path "[0]": must start with '.'`},
		{".a[x]", `hashing: path ".a[x]": invalid array index "[x]" (want one or more digits 0-9 in [])`},
		{".a[-1]", `hashing: path ".a[-1]": invalid array index "[-1]" (want one or more digits 0-9 in [])`},
		{".a[+1]", `hashing: path ".a[+1]": invalid array index "[+1]" (want one or more digits 0-9 in [])`},
		{".a[]", `hashing: path ".a[]": invalid array index "[]" (want one or more digits 0-9 in [])`},
		{".a[1", `hashing: path ".a[1": invalid array index "[1" (want one or more digits 0-9 in [])`},
		{".a[1.5]", `hashing: path ".a[1.5]": invalid array index "[1.5]" (want one or more digits 0-9 in [])`},
		{".a[ 1]", `hashing: path ".a[ 1]": invalid array index "[ 1]" (want one or more digits 0-9 in [])`},
		{".a[99999999999999999999]", `hashing: path ".a[99999999999999999999]": invalid array index "[99999999999999999999]" (too large)`},
		{`.["a`, "hashing: path \".[\\\"a\": unterminated quoted key (want `\"]`)"},
		{`.["a"`, "hashing: path \".[\\\"a\\\"\": unterminated quoted key (want `\"]`)"},
		{`.["a\"]`, "hashing: path \".[\\\"a\\\\\\\"]\": unterminated quoted key (want `\"]`)"},
		{`.["a\`, "hashing: path \".[\\\"a\\\\\": unterminated quoted key (want `\"]`)"},
		{".a-b", `hashing: path ".a-b": unexpected character '-' at offset 2`},
		{".a b", `hashing: path ".a b": unexpected character ' ' at offset 2`},
		{".1a", `hashing: path ".1a": unexpected character '1' at offset 1`},
		{".é", `hashing: path ".é": unexpected character 'é' at offset 1`},
		{".a]", `hashing: path ".a]": unexpected character ']' at offset 2`},
		{".a'", `hashing: path ".a'": unexpected character '\'' at offset 2`},
		{".a\"", `hashing: path ".a\"": unexpected character '"' at offset 2`},
		{".a\x00", `hashing: path ".a\x00": unexpected character '\x00' at offset 2`},
		{".a\xff", `hashing: path ".a\xff": invalid UTF-8 at offset 2`},
		{".[\"a\xff\"]", `hashing: path ".[\"a\xff\"]": invalid UTF-8 at offset 4`},
	}
	for _, tc := range tests {
		p, err := hashing.ParsePath(tc.in)
		if err == nil {
			t.Errorf("ParsePath(%q) = %v, want error", tc.in, p)
			continue
		}
		if err.Error() != tc.want {
			t.Errorf("ParsePath(%q) error\n got %s\nwant %s", tc.in, err, tc.want)
		}
	}
}
