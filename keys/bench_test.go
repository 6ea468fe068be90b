package keys_test

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/dedupeworker/dedupeworker/keys"
)

// corpusDir is the shared GitHub webhook corpus, or "" when this checkout does not have it.
func corpusDir() string {
	dir := filepath.Join("..", "..", "shared", "corpus", "github")
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		return ""
	}
	return dir
}

func loadCorpus(b *testing.B) [][]byte {
	dir := corpusDir()
	if dir == "" {
		b.Skip("GitHub corpus not found at ../../shared/corpus/github (see shared/README.md); skipping")
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
		b.Skip("GitHub corpus has no *.json files; skipping")
	}
	return bodies
}

// naiveExtract is the baseline: decode the whole body into map[string]any, then walk the path.
func naiveExtract(path []string, body []byte) (string, bool) {
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return "", false
	}
	for _, name := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return "", false
		}
		if v, ok = m[name]; !ok {
			return "", false
		}
	}
	switch t := v.(type) {
	case string:
		return t, t != ""
	case float64:
		return strconv.FormatFloat(t, 'f', -1, 64), true
	}
	return "", false
}

func benchPair(b *testing.B, path string, bodies [][]byte) {
	spec := mustSpec(b, `{json: `+path+`}`)
	names := strings.Split(path, ".")
	total := 0
	for _, body := range bodies {
		total += len(body)
		got, _ := keys.Extractor{MaxJSONBytes: 4 << 20}.Extract(spec, nil, body)
		want, _ := naiveExtract(names, body)
		if got != want && len(want) <= keys.MaxKeyBytes {
			b.Fatalf("path %s: jsonscan %q, naive %q", path, got, want)
		}
	}
	b.Run("jsonscan", func(b *testing.B) {
		x := keys.Extractor{MaxJSONBytes: 4 << 20}
		b.ReportAllocs()
		b.SetBytes(int64(total))
		for b.Loop() {
			for _, body := range bodies {
				x.Extract(spec, nil, body)
			}
		}
	})
	b.Run("naive", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(total))
		for b.Loop() {
			for _, body := range bodies {
				naiveExtract(names, body)
			}
		}
	})
}

// BenchmarkExtractJSONCorpus extracts a key from every payload of the GitHub corpus (one op = the whole corpus).
func BenchmarkExtractJSONCorpus(b *testing.B) {
	bodies := loadCorpus(b)
	for _, path := range []string{"repository.id", "sender.login"} {
		b.Run(path, func(b *testing.B) { benchPair(b, path, bodies) })
	}
}

// BenchmarkExtractJSON1MiB extracts from a generated 1 MiB body: a member at the start (the scan must still
// validate the whole body) and one nested after the bulk.
func BenchmarkExtractJSON1MiB(b *testing.B) {
	body := largeBody(1 << 20)
	for _, path := range []string{"id", "data.object.id", "livemode"} {
		b.Run(path, func(b *testing.B) { benchPair(b, path, [][]byte{body}) })
	}
}

// BenchmarkExtractHeader is the header hot path.
func BenchmarkExtractHeader(b *testing.B) {
	spec := mustSpec(b, "github")
	var h keys.Headers = keys.HeaderList{{"Content-Type", "application/json"}, {"User-Agent", "GitHub-Hookshot/abc"},
		{"X-GitHub-Event", "push"}, {"X-GitHub-Delivery", "72d3162e-cc78-11e3-81ab-4c9367dc0958"}}
	b.ReportAllocs()
	for b.Loop() {
		keys.Extractor{}.Extract(spec, h, nil)
	}
}

// workloadBodies wraps each body the way the workload of bench/ does for its orders ({json: data.order.id},
// the key near the start and the whole body after it still to validate) and forms ({payload: {}}, a digest of
// everything) sources, so that these benchmarks measure what the worker spends per envelope on keys.
func workloadBodies(source string, inner [][]byte) [][]byte {
	out := make([][]byte, len(inner))
	for i, body := range inner {
		nonce := fmt.Sprintf("%016x", i*7919)
		switch source {
		case "orders":
			out[i] = []byte(`{"type":"order.updated","delivery_attempt":1,"data":{"order":{"id":"` + nonce +
				`","tenant":"t3","detail":` + string(body) + `}}}`)
		default:
			out[i] = []byte(`{"form":"contact","submission_id":"` + nonce + `","fields":` + string(body) + `}`)
		}
	}
	return out
}

func benchExtract(b *testing.B, spec keys.Spec, bodies [][]byte) {
	x := keys.Extractor{MaxJSONBytes: 4 << 20}
	total := 0
	for _, body := range bodies {
		total += len(body)
		if k, r := x.Extract(spec, nil, body); k == "" {
			b.Fatalf("no key: %v", r)
		}
	}
	b.ReportAllocs()
	b.SetBytes(int64(total))
	for b.Loop() {
		for _, body := range bodies {
			x.Extract(spec, nil, body)
		}
	}
}

// BenchmarkExtractWorkload is the per-envelope key cost of the bench's orders and forms sources, over the GitHub
// corpus (one op = every body; skipped without the corpus) and over one synthetic 12 KiB body (always).
func BenchmarkExtractWorkload(b *testing.B) {
	specs := map[string]keys.Spec{"orders": mustSpec(b, "{json: data.order.id}"), "forms": mustSpec(b, "{payload: {}}")}
	for _, source := range []string{"orders", "forms"} {
		b.Run(source+"/synthetic12KiB", func(b *testing.B) {
			benchExtract(b, specs[source], workloadBodies(source, [][]byte{largeBody(12 << 10)}))
		})
		b.Run(source+"/corpus", func(b *testing.B) {
			benchExtract(b, specs[source], workloadBodies(source, loadCorpus(b)))
		})
	}
}
