package hashing_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/dedupeworker/dedupeworker/hashing"
)

func loadCorpus(b *testing.B) [][]byte {
	dir := corpusDir()
	if dir == "" {
		b.Skip("GitHub webhook corpus not found at ../../shared/corpus/github; skipping corpus benchmark")
	}
	var docs [][]byte
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(p) != ".json" {
			return err
		}
		raw, err := os.ReadFile(p)
		if err == nil {
			docs = append(docs, raw)
		}
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
	if len(docs) == 0 {
		b.Skip("GitHub webhook corpus is empty")
	}
	return docs
}

func benchDocs(b *testing.B, docs [][]byte, digest func([]byte) (string, error)) {
	total := 0
	for _, d := range docs {
		total += len(d)
		if _, err := digest(d); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.SetBytes(int64(total))
	for b.Loop() {
		for _, d := range docs {
			if _, err := digest(d); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func BenchmarkDigestGitHubCorpus(b *testing.B) {
	h := mustNew(b, hashing.Options{})
	benchDocs(b, loadCorpus(b), h.Digest)
}

func BenchmarkDigestGitHubCorpusNaive(b *testing.B) {
	benchDocs(b, loadCorpus(b), naiveDigest)
}

func BenchmarkDigestGitHubCorpusOnly(b *testing.B) {
	h := mustNew(b, hashing.Options{Only: []string{".action", ".repository.id", ".sender.login"}})
	benchDocs(b, loadCorpus(b), h.Digest)
}

func BenchmarkDigest1MiB(b *testing.B) {
	h := mustNew(b, hashing.Options{})
	benchDocs(b, [][]byte{generated(1 << 20)}, h.Digest)
}

func BenchmarkDigest1MiBNaive(b *testing.B) {
	benchDocs(b, [][]byte{generated(1 << 20)}, naiveDigest)
}

// BenchmarkDigest12KiB is one generated body of the corpus's mean size, for checkouts without the corpus.
func BenchmarkDigest12KiB(b *testing.B) {
	h := mustNew(b, hashing.Options{})
	benchDocs(b, [][]byte{generated(12 << 10)}, h.Digest)
}
