package hashing_test

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/dedupeworker/dedupeworker/hashing"
	"github.com/dedupeworker/dedupeworker/internal/jsonscan"
)

// checkInvariants checks, for a payload h accepts, that its digest survives re-encoding: reordered members,
// different whitespace, every string character escaped and floats in another notation.
func checkInvariants(t *testing.T, h *hashing.Hasher, data []byte) {
	t.Helper()
	want, err := h.Digest(data)
	if err != nil {
		t.Fatalf("Digest(%q): %v", data, err)
	}
	tree, err := parseTree(data)
	if err != nil {
		t.Fatalf("parseTree(%q): %v", data, err)
	}
	for _, o := range []reemit{
		{},
		{reverse: true},
		{indent: "\t"},
		{reverse: true, indent: "  "},
		{escapeAll: true},
		{reverse: true, escapeAll: true, indent: " "},
	} {
		var b bytes.Buffer
		o.emit(&b, tree, 0)
		got, err := h.Digest(b.Bytes())
		if err != nil {
			t.Fatalf("re-encoded %+v %q of %q: %v", o, b.Bytes(), data, err)
		}
		if got != want {
			var c1, c2 bytes.Buffer
			h.Canonical(&c1, data)
			h.Canonical(&c2, b.Bytes())
			t.Fatalf("re-encoding %+v changes the digest:\n in  %q\n out %q\n canonical %q\n vs        %q", o, data, b.Bytes(), c1.String(), c2.String())
		}
	}
}

var fuzzHashers = func() []*hashing.Hasher {
	var hs []*hashing.Hasher
	for _, o := range []hashing.Options{
		{},
		{Only: []string{".a", ".[1]", ".b.c[0]", ".b.c[2]", `.[""]`, ".[0].a"}},
		{Only: []string{".b.c", ".b"}},
		{Except: []string{".a", ".[0]", ".b.c[0]", ".[0]", `.[""]`}},
		{Except: []string{".b", "."}},
	} {
		h, err := hashing.New(o)
		if err != nil {
			panic(err)
		}
		hs = append(hs, h)
	}
	return hs
}()

var surrogateEscape = regexp.MustCompile(`(?i)\\u[dD][89a-fA-F]`)

func FuzzDigest(f *testing.F) {
	for _, s := range []string{
		`{}`, `[]`, `{"a":1,"b":[1,2,{"c":[3,4,5]}]}`, `{"a":1,"a":2}`, `[1.5e-7,100.0,1e21,-0,-0.0]`,
		`"\u0000\u001f\ud83d\ude00é\/"`, `{"b":{"c":[1,2,3]},"":0}`, `[{"a":null},2]`, `{"é":1,"e":2,"\u00e9":3}`,
		`1e400`, "\"\xff\"", `"\ud800"`, `[1,]`, `01`, `{"a":1} x`, strings.Repeat("[", 1001),
	} {
		f.Add([]byte(s))
	}
	if dir := corpusDir(); dir != "" {
		for _, p := range []string{"push/payload.json", "issues/payload.json", "ping/payload.json"} {
			if b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p))); err == nil {
				f.Add(b)
			}
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		valid := jsonscan.Valid(data)
		for i, h := range fuzzHashers {
			d, err := h.Digest(data)
			if err != nil {
				if !strings.HasPrefix(err.Error(), "hashing: ") {
					t.Fatalf("error without prefix: %v", err)
				}
				if valid == nil && !strings.Contains(err.Error(), "overflows float64") {
					t.Fatalf("valid JSON %q rejected: %v", data, err)
				}
				continue
			}
			if valid != nil {
				t.Fatalf("invalid JSON %q (%v) accepted", data, valid)
			}
			if len(d) != 64 {
				t.Fatalf("digest %q", d)
			}
			checkInvariants(t, h, data)
			if i == 0 && utf8.Valid(data) && !surrogateEscape.Match(data) {
				// An independent implementation must agree.
				want, err := naiveDigest(data)
				if err != nil {
					t.Fatalf("naive rejects %q: %v", data, err)
				}
				if d != want {
					var c bytes.Buffer
					h.Canonical(&c, data)
					t.Fatalf("digest of %q differs from the naive one; canonical %q", data, c.String())
				}
			}
		}
	})
}

func FuzzParsePath(f *testing.F) {
	for _, s := range []string{".", "..", ".a", ".a.b", ".a[0]", ".[0]", `.["a.b"]`, `.["a\"]b"]`, `.["a\\"]`, ".a[0]b",
		".a[-1]", ".a[x]", `.["a`, ".a-b", "a", "", ".é", `.[""]`, ".a[007]", `.["\]"]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := hashing.ParsePath(s)
		if err != nil {
			if !strings.HasPrefix(err.Error(), fmt.Sprintf("hashing: path %q: ", s)) {
				t.Fatalf("error %q does not name the path", err)
			}
			return
		}
		str := p.String()
		q, err := hashing.ParsePath(str)
		if err != nil {
			t.Fatalf("ParsePath(%q).String() = %q does not parse: %v", s, str, err)
		}
		if !reflect.DeepEqual(p.Steps(), q.Steps()) {
			t.Fatalf("round trip %q -> %q: %+v != %+v", s, str, p.Steps(), q.Steps())
		}
		if q.String() != str {
			t.Fatalf("String not stable: %q -> %q", str, q.String())
		}
		for _, st := range p.Steps() {
			if st.IsIndex && (st.Index < 0 || st.Name != "") || !st.IsIndex && st.Index != 0 {
				t.Fatalf("bad step %+v", st)
			}
			if !utf8.ValidString(st.Name) {
				t.Fatalf("step name %q is not UTF-8", st.Name)
			}
		}
		if _, err := hashing.New(hashing.Options{Only: []string{s}}); err != nil {
			t.Fatalf("New rejects a path ParsePath accepts: %v", err)
		}
	})
}

// corpusDir is the shared GitHub webhook corpus, or "" when it is absent.
func corpusDir() string {
	dir := filepath.Join("..", "..", "shared", "corpus", "github")
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return ""
	}
	return dir
}

// generated returns a deterministic JSON document of about n bytes: an array of webhook-like objects with nested
// members, escapes, non-ASCII text, integers and floats.
func generated(n int) []byte {
	r := rand.New(rand.NewPCG(1, 2))
	var b bytes.Buffer
	b.WriteString("[")
	for i := 0; b.Len() < n; i++ {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"id":%d,"node_id":"MDQ6VXNlcjU4MzIzMQ==%d","s":"line\n\ttab \"q\" é ✨ \u00e9 %x",`+
			`"score":%g,"ratio":%.3f,"big":%d%d,"ok":%t,"none":null,"tags":["a","b\/c","%d"],`+
			`"o":{"z":%d,"y":{"x":[1,2.5,-0,{"w":"\ud83d\ude00"}]},"a":"%s"}}`,
			r.IntN(1e9), i, r.Uint64(), r.Float64()*1e6, r.Float64(), r.Uint64(), r.Uint64(), r.IntN(2) == 0,
			i, r.IntN(100), strings.Repeat("long text ", r.IntN(20)))
	}
	b.WriteString("]")
	return b.Bytes()
}

func TestGeneratedIsValid(t *testing.T) {
	if err := jsonscan.Valid(generated(1 << 16)); err != nil {
		t.Fatal(err)
	}
}

// cacheNames share prefixes (eight bytes and shorter, zero-padded) so that fuzzed objects collide in the sort
// cache's shape hash, and repeat so that they hold duplicate names.
var cacheNames = []string{"abcdefgh", "abcdefgh_1", "abcdefgh_2", "abcdefgha", "abcdefg", "abcdefgi", "a", "a\u0000",
	"a\u0000\u0000", "b", "", "zz", "é", "repository_url", "repository_id"}

// FuzzSortCache reads data as a run of objects (each byte picks a member name, 0xff ends an object), hashes them
// twice in one payload through one working state, so that the second copy meets the cached orders of the first
// (and later objects those of earlier ones), and checks the digest against the naive implementation.
func FuzzSortCache(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 0xff, 0, 2, 1, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 1, 0xff, 2, 1, 3, 4, 5, 6, 7, 8, 9, 10, 11, 2})
	f.Add([]byte{6, 7, 8, 9, 10, 11, 12, 13, 14, 0xff, 8, 7, 6, 9, 10, 11, 12, 14, 13})
	h := mustNew(f, hashing.Options{})
	f.Fuzz(func(t *testing.T, data []byte) {
		var objs []string
		var names []string
		flush := func() {
			objs = append(objs, object(names, func(k int) string { return strconv.Itoa(len(objs)*1000 + k) }))
			names = names[:0]
		}
		for _, c := range data {
			if c == 0xff {
				flush()
				continue
			}
			names = append(names, cacheNames[int(c)%len(cacheNames)])
		}
		flush()
		payload := []byte(array(append(objs, objs...)))
		got, err := hashing.NewCacheState().Digest(h, payload)
		if err != nil {
			t.Fatal(err)
		}
		want, err := naiveDigest(payload)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			var c bytes.Buffer
			h.Canonical(&c, payload)
			t.Fatalf("digest of %s differs from the naive one; canonical %s", payload, c.String())
		}
	})
}
