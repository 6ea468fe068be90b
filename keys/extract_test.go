package keys_test

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dedupeworker/dedupeworker/hashing"
	"github.com/dedupeworker/dedupeworker/keys"
)

func mustSpec(t testing.TB, doc string) keys.Spec {
	t.Helper()
	s, err := keys.ParseSpec([]byte(doc))
	if err != nil {
		t.Fatalf("ParseSpec(%q): %v", doc, err)
	}
	return s
}

func hashed(k string) string {
	sum := sha256.Sum256([]byte(k))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// TestPinnedVectors runs every line of testdata/keys-pinned.jsonl, with the spec read both by ParseSpec and as a
// source in a sources file.
func TestPinnedVectors(t *testing.T) {
	f, err := os.Open(filepath.Join("testdata", "keys-pinned.jsonl"))
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
			From    string          `json:"from"`
			Dedupe  json.RawMessage `json:"dedupe"`
			Headers [][2]string     `json:"headers"`
			Body    string          `json:"body"`
			Key     *string         `json:"key"`
		}
		if err := json.Unmarshal(line, &v); err != nil {
			t.Fatalf("line %d: %v", n, err)
		}
		t.Run(fmt.Sprintf("%02d %s", n, v.From), func(t *testing.T) {
			spec, err := keys.ParseSpec(v.Dedupe)
			if err != nil {
				t.Fatalf("ParseSpec(%s): %v", v.Dedupe, err)
			}
			srcs, err := keys.LoadSources([]byte(`{"sources":{"src":{"dedupe":` + string(v.Dedupe) + `}}}`))
			if err != nil {
				t.Fatalf("LoadSources: %v", err)
			}
			fromFile, ok := srcs.Lookup("src")
			if !ok {
				t.Fatal("source src not found")
			}
			var hs keys.HeaderList
			for _, h := range v.Headers {
				hs = append(hs, keys.Header{Name: h[0], Value: h[1]})
			}
			for _, s := range []keys.Spec{spec, fromFile} {
				key, reason := keys.Extractor{}.Extract(s, hs, []byte(v.Body))
				switch {
				case v.Key == nil && (key != "" || reason == keys.ReasonNone):
					t.Errorf("got key %q (reason %q), want none", key, reason)
				case v.Key != nil && (key != *v.Key || reason != keys.ReasonNone):
					t.Errorf("got key %q (reason %q), want %q", key, reason, *v.Key)
				}
			}
		})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no vectors in testdata/keys-pinned.jsonl")
	}
}

type extractCase struct {
	name    string
	spec    string // as for ParseSpec
	headers keys.HeaderList
	body    string
	key     string
	reason  keys.Reason
}

func runExtract(t *testing.T, x keys.Extractor, cases []extractCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := mustSpec(t, c.spec)
			key, reason := x.Extract(s, c.headers, []byte(c.body))
			if key != c.key || reason != c.reason {
				t.Errorf("Extract(%s, %v, %q) = %q, %q; want %q, %q", c.spec, c.headers, c.body, key, reason, c.key, c.reason)
			}
		})
	}
}

func TestExtractPresets(t *testing.T) {
	hdr := func(name, value string) keys.HeaderList {
		return keys.HeaderList{{Name: "Content-Type", Value: "x"}, {Name: name, Value: value}}
	}
	runExtract(t, keys.Extractor{}, []extractCase{
		{"github", "github", hdr("X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958"), `{"id":"no"}`, "72d3162e-cc78-11e3-81ab-4c9367dc0958", ""},
		{"github lower-case header", "github", hdr("x-github-delivery", "d"), `{}`, "d", ""},
		{"github missing", "github", hdr("X-GitHub-Event", "push"), `{"id":"no"}`, "", keys.ReasonMissing},
		{"standard_webhooks", "standard_webhooks", hdr("Webhook-Id", "msg_1"), `{}`, "msg_1", ""},
		{"svix", "svix", hdr("SVIX-ID", "msg_2"), `{}`, "msg_2", ""},
		{"shopify", "shopify", hdr("x-shopify-webhook-id", "b5"), `{}`, "b5", ""},
		{"stripe", "stripe", nil, `{"id":"evt_1","object":"event","data":{"object":{"id":"pi_1"}}}`, "evt_1", ""},
		{"stripe ignores headers", "stripe", hdr("id", "h"), `{"object":"event"}`, "", keys.ReasonMissing},
		{"salesforce", "salesforce", nil, `{"id":"001xx-1700000000","Name":"Acme"}`, "001xx-1700000000", ""},
		{"salesforce without id", "salesforce", nil, `{"Id":"001xx"}`, "", keys.ReasonMissing},
		{"preset object form", `{preset: stripe, ttl: 48h}`, nil, `{"id":"evt_2"}`, "evt_2", ""},
	})
}

func TestExtractHeader(t *testing.T) {
	long := strings.Repeat("h", 201)
	runExtract(t, keys.Extractor{}, []extractCase{
		{"exact case", `{header: X-Event-Id}`, keys.HeaderList{{"X-Event-Id", "a"}}, "", "a", ""},
		{"case-insensitive", `{header: X-Event-Id}`, keys.HeaderList{{"x-EVENT-id", "a"}}, "", "a", ""},
		{"spec lower, header upper", `{header: x-event-id}`, keys.HeaderList{{"X-EVENT-ID", "a"}}, "", "a", ""},
		{"first header wins", `{header: X-Event-Id}`, keys.HeaderList{{"x-event-id", "first"}, {"X-Event-Id", "second"}}, "", "first", ""},
		{"empty value", `{header: X-Event-Id}`, keys.HeaderList{{"X-Event-Id", ""}}, "", "", keys.ReasonMissing},
		{"empty first value wins over later", `{header: X-Event-Id}`, keys.HeaderList{{"X-Event-Id", ""}, {"X-Event-Id", "b"}}, "", "", keys.ReasonMissing},
		{"values untrimmed", `{header: X-Event-Id}`, keys.HeaderList{{"X-Event-Id", "  a b \t"}}, "", "  a b \t", ""},
		{"whitespace-only value is a key", `{header: X-Event-Id}`, keys.HeaderList{{"X-Event-Id", " "}}, "", " ", ""},
		{"comma value not split", `{header: X-Event-Id}`, keys.HeaderList{{"X-Event-Id", "a, b"}}, "", "a, b", ""},
		{"no headers", `{header: X-Event-Id}`, nil, `{"X-Event-Id":"a"}`, "", keys.ReasonMissing},
		{"prefix name does not match", `{header: X-Event-Id}`, keys.HeaderList{{"X-Event-Id2", "a"}, {"X-Event-I", "b"}}, "", "", keys.ReasonMissing},
		{"no Unicode folding", `{header: X-K}`, keys.HeaderList{{"X-\u212a", "a"}}, "", "", keys.ReasonMissing},
		{"body ignored, even invalid", `{header: X-Event-Id}`, keys.HeaderList{{"X-Event-Id", "a"}}, "{not json", "a", ""},
		{"long value hashed", `{header: X-Event-Id}`, keys.HeaderList{{"X-Event-Id", long}}, "", hashed(long), ""},
	})
	// A nil Headers interface is no key.
	if key, reason := (keys.Extractor{}).Extract(mustSpec(t, "github"), nil, nil); key != "" || reason != keys.ReasonMissing {
		t.Errorf("nil headers: %q, %q", key, reason)
	}
}

func TestExtractJSON(t *testing.T) {
	big := "123456789012345678901234567890123456789012345678901234567890"
	runExtract(t, keys.Extractor{}, []extractCase{
		{"string", `{json: data.id}`, nil, `{"data":{"id":"abc"}}`, "abc", ""},
		{"escaped string decoded", `{json: id}`, nil, `{"id":"a\"b\\c\/d\u00e9\ud83d\ude00\n"}`, "a\"b\\c/dé😀\n", ""},
		{"unicode string", `{json: id}`, nil, `{"id":"héllo ✨"}`, "héllo ✨", ""},
		{"integer", `{json: data.id}`, nil, `{"data":{"id":42}}`, "42", ""},
		{"negative integer", `{json: id}`, nil, `{"id":-7}`, "-7", ""},
		{"zero", `{json: id}`, nil, `{"id":0}`, "0", ""},
		{"minus zero", `{json: id}`, nil, `{"id":-0}`, "0", ""},
		{"big integer keeps digits", `{json: id}`, nil, `{"id":` + big + `}`, big, ""},
		{"float", `{json: id}`, nil, `{"id":1.5}`, "", keys.ReasonMissing},
		{"float with zero fraction", `{json: id}`, nil, `{"id":1.0}`, "", keys.ReasonMissing},
		{"exponent", `{json: id}`, nil, `{"id":1e3}`, "", keys.ReasonMissing},
		{"true", `{json: id}`, nil, `{"id":true}`, "", keys.ReasonMissing},
		{"false", `{json: id}`, nil, `{"id":false}`, "", keys.ReasonMissing},
		{"null", `{json: id}`, nil, `{"id":null}`, "", keys.ReasonMissing},
		{"object", `{json: id}`, nil, `{"id":{"id":"x"}}`, "", keys.ReasonMissing},
		{"array", `{json: id}`, nil, `{"id":["x"]}`, "", keys.ReasonMissing},
		{"empty string", `{json: id}`, nil, `{"id":""}`, "", keys.ReasonMissing},
		{"escaped NUL is a key", `{json: id}`, nil, `{"id":"\u0000"}`, "\x00", ""},
		{"absent", `{json: id}`, nil, `{"ID":"x","Id":"y"}`, "", keys.ReasonMissing},
		{"names are case-sensitive", `{json: data.id}`, nil, `{"Data":{"id":"x"}}`, "", keys.ReasonMissing},
		{"array on the path", `{json: data.id}`, nil, `{"data":[{"id":"x"}]}`, "", keys.ReasonMissing},
		{"scalar on the path", `{json: data.id}`, nil, `{"data":"id"}`, "", keys.ReasonMissing},
		{"null on the path", `{json: data.id}`, nil, `{"data":null}`, "", keys.ReasonMissing},
		{"top-level array", `{json: id}`, nil, `[{"id":"x"}]`, "", keys.ReasonMissing},
		{"top-level string", `{json: id}`, nil, `"id"`, "", keys.ReasonMissing},
		{"top-level number", `{json: id}`, nil, `7`, "", keys.ReasonMissing},
		{"deep path", `{json: a.b.c.d}`, nil, `{"x":[{"a":1}],"a":{"q":{"b":{"c":{"d":"no"}}},"b":{"c":{"e":1,"d":"yes","f":[]}}}}`, "yes", ""},
		{"same name elsewhere ignored", `{json: data.id}`, nil, `{"id":"top","other":{"data":{"id":"other"}},"data":{"x":{"id":"deep"},"id":"right"}}`, "right", ""},
		{"duplicate member: last wins", `{json: id}`, nil, `{"id":"a","id":"b"}`, "b", ""},
		{"duplicate member: later non-string clears", `{json: id}`, nil, `{"id":"a","id":1.5}`, "", keys.ReasonMissing},
		{"duplicate member: later null clears", `{json: id}`, nil, `{"id":"a","x":1,"id":null}`, "", keys.ReasonMissing},
		{"duplicate member: later object clears", `{json: id}`, nil, `{"id":"a","id":{"id":"c"}}`, "", keys.ReasonMissing},
		{"duplicate member: later empty string clears", `{json: id}`, nil, `{"id":"a","id":""}`, "", keys.ReasonMissing},
		{"duplicate member: non-string then string", `{json: id}`, nil, `{"id":true,"id":"b"}`, "b", ""},
		{"duplicate member: string then integer", `{json: id}`, nil, `{"id":"a","id":7}`, "7", ""},
		{"duplicate parent: last wins", `{json: data.id}`, nil, `{"data":{"id":"a"},"data":{"id":"b"}}`, "b", ""},
		{"duplicate parent: later without the member", `{json: data.id}`, nil, `{"data":{"id":"a"},"data":{"x":"b"}}`, "", keys.ReasonMissing},
		{"duplicate parent: later scalar", `{json: data.id}`, nil, `{"data":{"id":"a"},"data":5}`, "", keys.ReasonMissing},
		{"duplicate parent: later array", `{json: data.id}`, nil, `{"data":{"id":"a"},"data":[{"id":"b"}]}`, "", keys.ReasonMissing},
		{"duplicate parent: earlier scalar", `{json: data.id}`, nil, `{"data":5,"data":{"id":"a"}}`, "a", ""},
		{"escaped name matches", `{json: id}`, nil, `{"\u0069d":"x"}`, "x", ""},
		{"escaped name on the path", `{json: data.id}`, nil, `{"d\u0061ta":{"i\u0064":"x"}}`, "x", ""},
		{"escaped name with a dot", `{json: '.["a.b"]'}`, nil, `{"a":{"b":"no"},"a\u002eb":"yes"}`, "yes", ""},
		{"non-ASCII name", `{json: données.clé}`, nil, `{"donn\u00e9es":{"clé":"x"}}`, "x", ""},
		{"hashing grammar path", `{json: .data.id}`, nil, `{"data":{"id":"x"}}`, "x", ""},
		{"whitespace everywhere", `{json: data.id}`, nil, " \n{ \"data\" :\t{ \"id\" : \"x\" } }\r\n ", "x", ""},
		{"long string hashed", `{json: id}`, nil, `{"id":"` + strings.Repeat("s", 201) + `"}`, hashed(strings.Repeat("s", 201)), ""},
		{"long escaped string hashed after decoding", `{json: id}`, nil, `{"id":"` + strings.Repeat(`\u0073`, 201) + `"}`, hashed(strings.Repeat("s", 201)), ""},
		{"200-byte escaped string kept", `{json: id}`, nil, `{"id":"` + strings.Repeat(`\u0073`, 200) + `"}`, strings.Repeat("s", 200), ""},
		{"long integer hashed", `{json: id}`, nil, `{"id":` + strings.Repeat("9", 201) + `}`, hashed(strings.Repeat("9", 201)), ""},
		{"200-digit integer kept", `{json: id}`, nil, `{"id":` + strings.Repeat("9", 200) + `}`, strings.Repeat("9", 200), ""},
	})
}

func TestExtractNotJSON(t *testing.T) {
	deep := strings.Repeat(`{"a":`, 1500) + "1" + strings.Repeat("}", 1500)
	var cases []extractCase
	for name, body := range map[string]string{
		"empty":                     ``,
		"whitespace":                ` `,
		"text":                      `not json`,
		"truncated":                 `{"id":"x"`,
		"trailing garbage":          `{"id":"x"} x`,
		"two values":                `{"id":"x"}{"id":"y"}`,
		"trailing comma":            `{"id":"x",}`,
		"single quotes":             `{'id':'x'}`,
		"unquoted name":             `{id:"x"}`,
		"invalid UTF-8 in value":    "{\"id\":\"x\xff\"}",
		"invalid UTF-8 elsewhere":   "{\"id\":\"x\",\"y\":\"\xc3\x28\"}",
		"lone surrogate":            `{"id":"x","y":"\ud800"}`,
		"lone low surrogate in key": `{"id":"\udc00"}`,
		"bad escape":                `{"id":"\x"}`,
		"control character":         "{\"id\":\"a\tb\"}",
		"leading zero":              `{"id":01}`,
		"plus sign":                 `{"id":+1}`,
		"NaN":                       `{"id":NaN}`,
		"error after match":         `{"id":"x","y":[1,2}`,
		"garbage after match":       `{"id":"x","y":tru}`,
		"nesting too deep":          `{"id":"x","y":` + deep + `}`,
		"BOM":                       "\ufeff{\"id\":\"x\"}",
	} {
		cases = append(cases, extractCase{name, `{json: id}`, nil, body, "", keys.ReasonNotJSON})
		cases = append(cases, extractCase{name + " (payload)", `{payload: {}}`, nil, body, "", keys.ReasonNotJSON})
	}
	runExtract(t, keys.Extractor{}, cases)
}

// sized returns a JSON body of exactly n bytes with "id":"x".
func sized(t testing.TB, n int) []byte {
	const head, tail = `{"id":"x","pad":"`, `"}`
	pad := n - len(head) - len(tail)
	if pad < 0 {
		t.Fatalf("size %d too small", n)
	}
	return []byte(head + strings.Repeat("p", pad) + tail)
}

func TestExtractSizeLimit(t *testing.T) {
	jsonSpec, payloadSpec, headerSpec := mustSpec(t, "stripe"), mustSpec(t, "{payload: {}}"), mustSpec(t, "github")
	hs := keys.HeaderList{{"X-GitHub-Delivery", "d"}}
	for _, x := range []keys.Extractor{{}, {MaxJSONBytes: 100}, {MaxJSONBytes: -1}} {
		limit := x.MaxJSONBytes
		if limit <= 0 {
			limit = keys.DefaultMaxJSONBytes
		}
		at, over := sized(t, limit), sized(t, limit+1)
		if key, reason := x.Extract(jsonSpec, nil, at); key != "x" || reason != "" {
			t.Errorf("limit %d: body of exactly the limit: %q, %q", limit, key, reason)
		}
		if key, reason := x.Extract(jsonSpec, nil, over); key != "" || reason != keys.ReasonTooLarge {
			t.Errorf("limit %d: one byte over: %q, %q", limit, key, reason)
		}
		if key, reason := x.Extract(payloadSpec, nil, at); len(key) != 64 || reason != "" {
			t.Errorf("limit %d: payload at the limit: %q, %q", limit, key, reason)
		}
		if key, reason := x.Extract(payloadSpec, nil, over); key != "" || reason != keys.ReasonTooLarge {
			t.Errorf("limit %d: payload one byte over: %q, %q", limit, key, reason)
		}
		if key, reason := x.Extract(headerSpec, hs, over); key != "d" || reason != "" {
			t.Errorf("limit %d: header source must ignore the limit: %q, %q", limit, key, reason)
		}
		// An over-size body is not read at all: even invalid JSON is too-large, not not-json.
		junk := bytes.Repeat([]byte("x"), limit+1)
		if _, reason := x.Extract(jsonSpec, nil, junk); reason != keys.ReasonTooLarge {
			t.Errorf("limit %d: over-size junk: %q", limit, reason)
		}
	}
}

func TestExtractKeyLength(t *testing.T) {
	for _, n := range []int{1, 199, 200, 201, 5000} {
		v := strings.Repeat("k", n)
		want := v
		if n > keys.MaxKeyBytes {
			want = hashed(v)
		}
		key, _ := keys.Extractor{}.Extract(mustSpec(t, "{header: x-k}"), keys.HeaderList{{"x-k", v}}, nil)
		if key != want {
			t.Errorf("header of %d bytes: got %q, want %q", n, key, want)
		}
		key, _ = keys.Extractor{}.Extract(mustSpec(t, "stripe"), nil, []byte(`{"id":"`+v+`"}`))
		if key != want {
			t.Errorf("json string of %d bytes: got %q, want %q", n, key, want)
		}
	}
	// The clamp counts bytes, not characters.
	v := strings.Repeat("é", 100) + "x" // 201 bytes
	key, _ := keys.Extractor{}.Extract(mustSpec(t, "{header: x-k}"), keys.HeaderList{{"x-k", v}}, nil)
	if key != hashed(v) {
		t.Errorf("201-byte multi-byte key: got %q", key)
	}
}

func TestExtractPayload(t *testing.T) {
	digest := func(opts hashing.Options, body string) string {
		off := false
		opts.Prefix = &off
		h, err := hashing.New(opts)
		if err != nil {
			t.Fatal(err)
		}
		d, err := h.Digest([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	a := `{"form":"contact","email":"a@example.com","submitted_at":"2024-01-01T00:00:00Z"}`
	b := `{"submitted_at":"2024-01-02T09:30:00Z","email":"a@example.com","form":"contact"}`
	c := `{"form":"contact","email":"b@example.com","submitted_at":"2024-01-01T00:00:00Z"}`
	except := mustSpec(t, `{payload: {except: [.submitted_at]}}`)
	ka, ra := keys.Extractor{}.Extract(except, nil, []byte(a))
	kb, _ := keys.Extractor{}.Extract(except, nil, []byte(b))
	kc, _ := keys.Extractor{}.Extract(except, nil, []byte(c))
	if ra != "" || len(ka) != 64 || ka != kb || ka == kc {
		t.Errorf("except: a=%q (%q) b=%q c=%q; want a == b != c, 64 hex chars", ka, ra, kb, kc)
	}
	if want := digest(hashing.Options{Except: []string{".submitted_at"}}, a); ka != want {
		t.Errorf("except: key %q, hashing digest %q", ka, want)
	}
	whole := mustSpec(t, `{payload: {}}`)
	kw, _ := keys.Extractor{}.Extract(whole, nil, []byte(a))
	if want := digest(hashing.Options{}, a); kw != want || kw == ka {
		t.Errorf("whole payload: key %q, want %q (and != except key)", kw, want)
	}
	only := mustSpec(t, `{payload: {only: [.email]}}`)
	ko, _ := keys.Extractor{}.Extract(only, nil, []byte(a))
	if want := digest(hashing.Options{Only: []string{".email"}}, a); ko != want {
		t.Errorf("only: key %q, want %q", ko, want)
	}
	// The pinned zizq digest (prefix off): {"user_id":42,"template":"welcome"}.
	kz, _ := keys.Extractor{}.Extract(whole, nil, []byte(`{"user_id":42,"template":"welcome"}`))
	if kz != "1f98104cc5a072ae84731379f5888c48c1886f7d58681e806cc9cca4d601f765" {
		t.Errorf("zizq pinned digest: got %q", kz)
	}
}

func TestExtractNoDedupe(t *testing.T) {
	key, reason := keys.Extractor{}.Extract(keys.Spec{}, keys.HeaderList{{"X-GitHub-Delivery", "d"}}, []byte(`{"id":"x"}`))
	if key != "" || reason != keys.ReasonNoDedupe {
		t.Errorf("zero Spec: %q, %q", key, reason)
	}
}

// largeBody builds a valid JSON body of at least n bytes with "id":"evt_1" first and a nested data.object.id.
func largeBody(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"id":"evt_1","type":"invoice.paid","data":{"object":{"id":"in_1","lines":[`)
	for i := 0; b.Len() < n-200; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"id":"il_%d","amount":%d,"ratio":%d.25e-3,"desc":"Line \"%d\" caf\u00e9 \u2603","tags":["a","b",null,true,false],"meta":{"k":{"x":[[],{}]}}}`, i, i*37, i, i)
	}
	b.WriteString(`],"total":12345}},"livemode":false}`)
	return b.Bytes()
}

func TestExtractAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not exact under the race detector (sync.Pool drops items at random)")
	}
	x := keys.Extractor{MaxJSONBytes: 2 << 20}
	stripe := mustSpec(t, "stripe")
	nested := mustSpec(t, "{json: data.object.id}")
	small, large := largeBody(1<<10), largeBody(1<<20)
	for _, s := range []keys.Spec{stripe, nested} {
		allocs := func(body []byte) float64 {
			return testing.AllocsPerRun(20, func() {
				if _, reason := x.Extract(s, nil, body); reason != "" {
					t.Fatalf("no key: %s", reason)
				}
			})
		}
		a1, a2 := allocs(small), allocs(large)
		if a1 != a2 {
			t.Errorf("%v: %v allocations for a 1 KiB body, %v for a 1 MiB body", s, a1, a2)
		}
		if a1 > 1 {
			t.Errorf("%v: %v allocations per extraction, want at most 1 (the key)", s, a1)
		}
	}
	// Header keys do not allocate, with either Headers implementation.
	var hl keys.Headers = keys.HeaderList{{"Content-Type", "application/json"}, {"X-GitHub-Delivery", "d"}}
	var nh keys.Headers = keys.NATSHeaders{"Content-Type": {"application/json"}, "x-github-delivery": {"d"}}
	gh := mustSpec(t, "github")
	for _, h := range []keys.Headers{hl, nh} {
		if a := testing.AllocsPerRun(100, func() { x.Extract(gh, h, large) }); a != 0 {
			t.Errorf("header key with %T: %v allocations", h, a)
		}
	}
}

// TestExtractConcurrent runs extractions from many goroutines (go test -race checks the pooled scanners).
func TestExtractConcurrent(t *testing.T) {
	x := keys.Extractor{}
	specs := []keys.Spec{mustSpec(t, "stripe"), mustSpec(t, "{json: data.object.id}"), mustSpec(t, "{payload: {except: [.livemode]}}")}
	body := largeBody(4 << 10)
	want := make([]string, len(specs))
	for i, s := range specs {
		want[i], _ = x.Extract(s, nil, body)
	}
	done := make(chan struct{})
	for g := 0; g < 8; g++ {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := 0; i < 20; i++ {
				for j, s := range specs {
					if k, _ := x.Extract(s, nil, body); k != want[j] {
						t.Errorf("concurrent %v: %q, want %q", s, k, want[j])
						return
					}
				}
				x.Extract(specs[0], nil, []byte(`{"id":"other"}`))
			}
		}()
	}
	for g := 0; g < 8; g++ {
		<-done
	}
}

func TestIdempotencyHeaderPlainKeys(t *testing.T) {
	if got := keys.IdempotencyHeader("acme", "stripe", "evt_1"); got != "acme:stripe:evt_1" {
		t.Errorf("IdempotencyHeader = %q", got)
	}
	if got := keys.IdempotencyHeader("t", "s", "a:b"); got != "t:s:a:b" {
		t.Errorf("IdempotencyHeader with colon in key = %q", got)
	}
}

func TestValidID(t *testing.T) {
	for s, want := range map[string]bool{
		"stripe": true, "a": true, "A-b_9": true, strings.Repeat("x", 64): true,
		"": false, strings.Repeat("x", 65): false, "a.b": false, "a b": false, "a*": false, "a>": false,
		"é": false, "a/b": false, "a:b": false,
	} {
		if got := keys.ValidID(s); got != want {
			t.Errorf("ValidID(%q) = %v, want %v", s, got, want)
		}
	}
}
