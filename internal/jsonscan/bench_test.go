package jsonscan_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dedupeworker/dedupeworker/internal/jsonscan"
)

// The validators are compared on the same bodies: the GitHub corpus the worker's bench uses (one op = every body
// of the corpus), and a synthetic 12 KiB body (the corpus's mean size) that exists in every checkout.
// encoding/json.Valid checks UTF-8 but not surrogates. The fastjson yardstick is in the bench module
// (bench/jsonbaseline_test.go), which keeps fastjson out of the worker's module.

// benchCorpus is every *.json body of ../shared/corpus/github, or a skip when this checkout lacks it.
func benchCorpus(b *testing.B) [][]byte {
	dir := filepath.Join("..", "..", "..", "shared", "corpus", "github")
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		b.Skip("GitHub corpus not found at ../../../shared/corpus/github; the Synthetic12KiB benchmarks still run")
	}
	var bodies [][]byte
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".json") {
			return err
		}
		body, err := os.ReadFile(path)
		bodies = append(bodies, body)
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	if len(bodies) == 0 {
		b.Skip("GitHub corpus has no *.json files")
	}
	return bodies
}

// synthetic12KiB is a webhook-shaped document of about 12 KiB: nested objects, arrays, long plain strings (URLs,
// text), a few escapes and non-ASCII runes, integers, floats, literals.
func synthetic12KiB() []byte {
	var b bytes.Buffer
	b.WriteString(`{"action":"opened","number":1347,"pull_request":{"url":"https://api.github.com/repos/octocat/Hello-World/pulls/1347","commits":[`)
	for i := 0; b.Len() < 12<<10-300; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"sha":"6dcb09b5b57875f334f61aebed695e2e4193db5%d","message":"Fix \"the bug\" in the parser\nSigned-off-by: Zoë ✨ <dev@example.com>",`+
			`"author":{"name":"The Octocat","email":"octocat@github.com","date":"2011-04-14T16:00:49Z"},"url":"https://api.github.com/repos/octocat/Hello-World/commits/6dcb09b%d",`+
			`"distinct":true,"added":[],"removed":null,"score":%d.25e-3,"comment_count":%d}`, i, i, i, i*7)
	}
	b.WriteString(`],"merged":false,"draft":false},"repository":{"id":1296269,"full_name":"octocat/Hello-World","private":false},"sender":{"login":"octocat","id":1,"site_admin":false}}`)
	return b.Bytes()
}

// validators are the functions compared: each returns whether the body is valid JSON.
var validators = []struct {
	name  string
	valid func([]byte) bool
}{
	{"jsonscan.Valid", func(b []byte) bool { return jsonscan.Valid(b) == nil }},
	{"jsonscan.Tokens", func(b []byte) bool { // every token through Next, as hashing reads a body
		var s jsonscan.Scanner
		s.Reset(b)
		for {
			t, err := s.Next()
			if err != nil {
				return false
			}
			if t.Kind == jsonscan.EOF {
				return true
			}
		}
	}},
	{"encoding-json.Valid", json.Valid},
}

func benchValidators(b *testing.B, bodies [][]byte) {
	total := 0
	for _, body := range bodies {
		total += len(body)
	}
	for _, v := range validators {
		for _, body := range bodies {
			if !v.valid(body) {
				b.Fatalf("%s: a corpus body is invalid", v.name)
			}
		}
		b.Run(v.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(total))
			for b.Loop() {
				for _, body := range bodies {
					v.valid(body)
				}
			}
		})
	}
}

// BenchmarkValidCorpus validates every body of the GitHub corpus (one op = the whole corpus).
func BenchmarkValidCorpus(b *testing.B) { benchValidators(b, benchCorpus(b)) }

// BenchmarkValidSynthetic12KiB validates the synthetic 12 KiB body.
func BenchmarkValidSynthetic12KiB(b *testing.B) { benchValidators(b, [][]byte{synthetic12KiB()}) }

// BenchmarkSkipValue is what a json key extraction spends on the members after its key: the name, then
// SkipValue over a 12 KiB value.
func BenchmarkSkipValue(b *testing.B) {
	doc := append(append([]byte(`{"detail":`), synthetic12KiB()...), '}')
	var s jsonscan.Scanner
	b.ReportAllocs()
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		s.Reset(doc)
		if _, err := s.Next(); err != nil {
			b.Fatal(err)
		}
		if _, err := s.Next(); err != nil {
			b.Fatal(err)
		}
		if err := s.SkipValue(); err != nil {
			b.Fatal(err)
		}
	}
}
