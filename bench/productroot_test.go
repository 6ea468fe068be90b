package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestProductRoot: the worker is built from the worker's module, found above the bench's own module (bench/ has
// a go.mod of its own) wherever in the checkout the bench runs.
func TestProductRoot(t *testing.T) {
	root := t.TempDir()
	write := func(rel, content string) {
		t.Helper()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("repo/go.mod", "// the worker\nmodule github.com/dedupeworker/dedupeworker\n\ngo 1.26\n")
	write("repo/bench/go.mod", "module github.com/dedupeworker/dedupeworker/bench\n\nreplace github.com/dedupeworker/dedupeworker => ../\n")
	write("repo/bench/sub/x.go", "package sub\n")
	write("other/go.mod", "module \"example.com/other\"\n")
	for _, c := range []struct{ from, want string }{
		{"repo", "repo"},
		{"repo/bench", "repo"},
		{"repo/bench/sub", "repo"},
		{"other", ""},
	} {
		got, err := productRoot(filepath.Join(root, c.from))
		switch {
		case c.want == "" && (err == nil || !strings.Contains(err.Error(), productModule)):
			t.Errorf("from %s: %q, %v; want an error naming %s", c.from, got, err, productModule)
		case c.want != "" && (err != nil || got != filepath.Join(root, c.want)):
			t.Errorf("from %s: %q, %v; want %s", c.from, got, err, c.want)
		}
	}
	for gomod, want := range map[string]string{
		"module github.com/dedupeworker/dedupeworker\n":               productModule,
		"module \"github.com/dedupeworker/dedupeworker\"\n":           productModule,
		"  module\tgithub.com/dedupeworker/dedupeworker/bench // x\n": "github.com/dedupeworker/dedupeworker/bench",
		"modules example.com/x\n":                                     "",
		"go 1.26\n":                                                   "",
	} {
		if got := modulePath([]byte(gomod)); got != want {
			t.Errorf("modulePath(%q) = %q, want %q", gomod, got, want)
		}
	}
}
