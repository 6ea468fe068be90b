package main

import (
	"encoding/json"
	"testing"

	"github.com/valyala/fastjson"

	"github.com/dedupeworker/dedupeworker/internal/jsonscan"
)

// BenchmarkValidators puts the worker's JSON validator beside two yardsticks on the bench's corpus (the GitHub
// corpus when present, else the generated one; one op = every body): encoding/json.Valid, and fastjson, a
// well-kept fast validator that does less than the worker's contract asks (it checks neither UTF-8 nor lone
// surrogate escapes). It lives here so that the worker's module does not depend on fastjson.
func BenchmarkValidators(b *testing.B) {
	corpus := GeneratedCorpus(1, 256)
	if dir := FindCorpus(""); dir != "" {
		var err error
		if corpus, err = LoadCorpus(dir); err != nil {
			b.Fatal(err)
		}
	}
	total := 0
	for _, body := range corpus.Bodies {
		total += len(body)
	}
	for _, v := range []struct {
		name  string
		valid func([]byte) bool
	}{
		{"jsonscan.Valid", func(b []byte) bool { return jsonscan.Valid(b) == nil }},
		{"encoding-json.Valid", json.Valid},
		{"fastjson.ValidateBytes", func(b []byte) bool { return fastjson.ValidateBytes(b) == nil }},
	} {
		for _, body := range corpus.Bodies {
			if !v.valid(body) {
				b.Fatalf("%s: a body of %s is invalid", v.name, corpus.Origin)
			}
		}
		b.Run(v.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(total))
			for b.Loop() {
				for _, body := range corpus.Bodies {
					v.valid(body)
				}
			}
		})
	}
}
