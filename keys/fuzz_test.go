package keys_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dedupeworker/dedupeworker/keys"
)

func FuzzParseSpec(f *testing.F) {
	for _, c := range specErrors {
		f.Add([]byte(c.doc))
	}
	for _, s := range []string{
		"github", "stripe", "{preset: stripe, ttl: 48h}", `{"json":"data.id"}`, "{payload: {except: [.ts]}}",
		`{json: '.["dotted.key"]'}`, "{header: X-Event-Id, ttl_seconds: 86400}", sourcesYAML, sourcesJSON,
		"sources:\n  a: {dedupe: {payload: {only: [.a.b[0], '.[\"x\"]']}}}\n", "&a x\n---\n*a", "{a: *b}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		s, err := keys.ParseSpec(doc)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "dedupe: ") {
				t.Fatalf("ParseSpec error without the dedupe: prefix: %q", err)
			}
			if s.Enabled() {
				t.Fatal("enabled spec with an error")
			}
		} else {
			if !s.Enabled() || s.Kind() == keys.KindNone {
				t.Fatal("ParseSpec succeeded with a disabled spec")
			}
			_ = s.String()
			if d, own := s.OwnTTL(); own && (d < 1e9 || d%1e9 != 0) {
				t.Fatalf("accepted TTL %v", d)
			}
			keys.Extractor{}.Extract(s, keys.HeaderList{{Name: "X-A", Value: "b"}}, []byte(`{"a":{"b":1}}`))
		}
		srcs, err := keys.LoadSources(doc)
		if err != nil {
			if !strings.HasPrefix(withoutLine(err).Error(), "sources") {
				t.Fatalf("LoadSources error without a sources place: %q", err)
			}
			return
		}
		for _, id := range srcs.IDs() {
			if !keys.ValidID(id) {
				t.Fatalf("LoadSources accepted id %q", id)
			}
			spec, _ := srcs.Lookup(id)
			_ = spec.Describe(keys.DefaultTTL)
		}
	})
}

// FuzzExtract: no panics, a reason from the set, and for json sources the same answer as an encoding/json oracle
// whenever the body is valid UTF-8 without surrogate escapes (where encoding/json is laxer than jsonscan).
func FuzzExtract(f *testing.F) {
	seeds := []string{
		`{"id":"evt_1"}`, `{"data":{"id":42}}`, `{"data":{"id":-0}}`, `{"id":1.5}`, `{"id":"a","id":"b"}`,
		`{"data":{"id":"a"},"data":{"x":1}}`, `{"\u0069d":"x"}`, `[{"id":"x"}]`, `{"id":"\ud83d\ude00"}`,
		`{"id":"\ud800"}`, "{\"id\":\"\xff\"}", `{"id":"x"} trailing`, `{"data":{"id":[1,{"id":2}]},"id":null}`,
		`{"id":` + strings.Repeat("7", 250) + `}`, `{"id":"` + strings.Repeat("x", 201) + `"}`,
		`{"a":{"b":{"c":"d"}},"a":{"b":{"c":"e"}}}`, ` {"id" : "x" } `,
	}
	for _, path := range []string{"id", "data.id", "a.b.c"} {
		for _, s := range seeds {
			f.Add(uint8(0), path, []byte(s))
		}
	}
	f.Add(uint8(1), "X-Event-Id", []byte("x-event-id\x00abc\x00X-Event-Id\x00def"))
	f.Add(uint8(1), "X-Event-Id", []byte("X-Event-Id\x00\x00x-event-id\x00d"))
	f.Add(uint8(2), ".ts", []byte(`{"ts":1,"a":[1,2.0,"x"]}`))
	if dir := corpusDir(); dir != "" {
		files, _ := filepath.Glob(filepath.Join(dir, "*", "*.json"))
		for i, file := range files {
			if i%25 != 0 {
				continue
			}
			if body, err := os.ReadFile(file); err == nil {
				f.Add(uint8(0), "repository.owner.login", body)
			}
		}
	}
	f.Fuzz(func(t *testing.T, mode uint8, arg string, body []byte) {
		x := keys.Extractor{}
		switch mode % 3 {
		case 0: // json source at path arg
			spec, err := keys.ParseSpec(mustJSON(map[string]string{"json": arg}))
			if err != nil {
				return
			}
			key, reason := x.Extract(spec, nil, body)
			checkReason(t, key, reason)
			if arg[0] == '.' {
				return // hashing path grammar: the oracle splits on dots only
			}
			wantKey, wantReason, ok := oracle(strings.Split(arg, "."), body)
			if ok && (key != wantKey || reason != wantReason) {
				t.Fatalf("path %q body %q: got %q, %q; oracle %q, %q", arg, body, key, reason, wantKey, wantReason)
			}
		case 1: // header source named arg; body holds NUL-separated name, value pairs
			spec, err := keys.ParseSpec(mustJSON(map[string]string{"header": arg}))
			if err != nil {
				return
			}
			parts := bytes.Split(body, []byte{0})
			var hs keys.HeaderList
			for i := 0; i+1 < len(parts); i += 2 {
				hs = append(hs, keys.Header{Name: string(parts[i]), Value: string(parts[i+1])})
			}
			key, reason := x.Extract(spec, hs, body)
			checkReason(t, key, reason)
			want := ""
			for _, h := range hs {
				if len(h.Name) == len(arg) && strings.EqualFold(h.Name, arg) && isASCII(h.Name) {
					want = h.Value
					break
				}
			}
			if len(want) > keys.MaxKeyBytes {
				want = hashed(want)
			}
			if key != want || (want == "") != (reason == keys.ReasonMissing) {
				t.Fatalf("header %q in %q: got %q, %q; want %q", arg, hs, key, reason, want)
			}
		case 2: // payload source, arg as an except path
			spec, err := keys.ParseSpec(mustJSON(map[string]any{"payload": map[string]any{"except": []string{arg}}}))
			if err != nil {
				return
			}
			key, reason := x.Extract(spec, nil, body)
			checkReason(t, key, reason)
			if reason == "" && len(key) != 64 {
				t.Fatalf("payload key %q", key)
			}
			// jsonscan is stricter than encoding/json, and hashing also rejects numbers that overflow float64,
			// so only one direction holds: what encoding/json rejects has no key.
			if !json.Valid(body) && reason != keys.ReasonNotJSON {
				t.Fatalf("payload of invalid JSON %q: key %q, reason %q", body, key, reason)
			}
		}
	})
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func checkReason(t *testing.T, key string, reason keys.Reason) {
	t.Helper()
	switch reason {
	case keys.ReasonNone:
		if key == "" || len(key) > keys.MaxKeyBytes {
			t.Fatalf("key %q with no reason", key)
		}
	case keys.ReasonMissing, keys.ReasonNotJSON, keys.ReasonTooLarge, keys.ReasonNoDedupe:
		if key != "" {
			t.Fatalf("key %q with reason %q", key, reason)
		}
	default:
		t.Fatalf("unknown reason %q", reason)
	}
}

// hasSurrogateEscape reports whether body may hold a \uD800-\uDFFF escape (conservatively: any "\u" followed by
// d and 8-f).
func hasSurrogateEscape(body []byte) bool {
	for i := 0; i+3 < len(body); i++ {
		if body[i] == '\\' && body[i+1] == 'u' && (body[i+2]|0x20) == 'd' && strings.IndexByte("89abcdefABCDEF", body[i+3]) >= 0 {
			return true
		}
	}
	return false
}

// jsonDepth is an upper bound of the nesting of body (brackets inside strings count too).
func jsonDepth(body []byte) int {
	d, m := 0, 0
	for _, c := range body {
		switch c {
		case '{', '[':
			d++
			m = max(m, d)
		case '}', ']':
			d--
		}
	}
	return m
}

// oracle extracts the key with encoding/json. ok is false where encoding/json is laxer than the package's rules
// (invalid UTF-8, surrogate escapes) or nests too deep to compare.
func oracle(path []string, body []byte) (key string, reason keys.Reason, ok bool) {
	if len(body) > keys.DefaultMaxJSONBytes {
		return "", keys.ReasonTooLarge, true
	}
	if !utf8.Valid(body) || hasSurrogateEscape(body) || jsonDepth(body) >= 900 {
		return "", "", false
	}
	if !json.Valid(body) {
		return "", keys.ReasonNotJSON, true
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return "", "", false
	}
	for _, name := range path {
		m, isObj := v.(map[string]any)
		if !isObj {
			return "", keys.ReasonMissing, true
		}
		if v, isObj = m[name]; !isObj {
			return "", keys.ReasonMissing, true
		}
	}
	switch t := v.(type) {
	case string:
		key = t
	case json.Number:
		if strings.ContainsAny(string(t), ".eE") {
			return "", keys.ReasonMissing, true
		}
		key = string(t)
		if key == "-0" {
			key = "0"
		}
	}
	if key == "" {
		return "", keys.ReasonMissing, true
	}
	if len(key) > keys.MaxKeyBytes {
		key = hashed(key)
	}
	return key, "", true
}

// TestOracleAgrees runs the fuzz oracle over fixed bodies, so that the oracle itself is checked in every test run.
func TestOracleAgrees(t *testing.T) {
	bodies := []string{`{"id":"a","id":"b"}`, `{"data":{"id":7},"data":{"id":"x"}}`, `{"id":-0}`, `{"id":1e2}`, `nope`, `{"id":"\u00e9"}`}
	if dir := corpusDir(); dir != "" {
		files, _ := filepath.Glob(filepath.Join(dir, "*", "*.json"))
		for i, file := range files {
			if (raceEnabled || testing.Short()) && i%10 != 0 {
				continue // the oracle is slow under the race detector; a sample suffices there
			}
			b, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			bodies = append(bodies, string(b))
		}
	}
	for _, path := range []string{"id", "data.id", "repository.id", "sender.login", "repository.owner.login", "installation.id"} {
		spec := mustSpec(t, `{json: `+path+`}`)
		for _, body := range bodies {
			key, reason := keys.Extractor{}.Extract(spec, nil, []byte(body))
			wantKey, wantReason, ok := oracle(strings.Split(path, "."), []byte(body))
			if !ok {
				t.Fatalf("oracle cannot judge %q", body)
			}
			if key != wantKey || reason != wantReason {
				t.Errorf("path %s body %.60q: got %q, %q; oracle %q, %q", path, body, key, reason, wantKey, wantReason)
			}
		}
	}
}
