package docscheck_test

import (
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dedupeworker/dedupeworker/internal/docscheck"
)

func TestSlug(t *testing.T) {
	for _, tc := range []struct{ heading, want string }{
		{"The two commands", "the-two-commands"},
		{"Quickstart with the `nats` CLI", "quickstart-with-the-nats-cli"},
		{"What `sources check` checks", "what-sources-check-checks"},
		{"Durability: what the guarantees rest on", "durability-what-the-guarantees-rest-on"},
		{"CPU per envelope, side by side with the floor: where the rest goes", "cpu-per-envelope-side-by-side-with-the-floor-where-the-rest-goes"},
		{"2. NATS restart (2b: SIGKILL)", "2-nats-restart-2b-sigkill"},
		{"500,000 envelopes, K = 1 (quiet machine)", "500000-envelopes-k--1-quiet-machine"},
		{"Receiver: signed POSTs vs a bare handler — and NATS", "receiver-signed-posts-vs-a-bare-handler--and-nats"},
		{"internal/natsreq — requests × 2", "internalnatsreq--requests--2"},
		{"A [linked](x.md) heading", "a-linked-heading"},
		{"snake_case stays", "snake_case-stays"},
	} {
		if got := docscheck.Slug(tc.heading); got != tc.want {
			t.Errorf("Slug(%q) = %q, want %q", tc.heading, got, tc.want)
		}
	}
}

func TestLinksAndAnchors(t *testing.T) {
	md := strings.Join([]string{
		"# Title", // 1
		"See [a](a.md#x) and [b](../b.md) `[c](c.md)`.", // 2
		"```",                                  // 3
		"[d](d.md)",                            // 4
		"```",                                  // 5
		"<!-- [e](e.md) -->",                   // 6
		"[ref]: https://example.com/f",         // 7
		"## Title",                             // 8
		`<a id="here"></a>![img](pic.png "t")`, // 9
		"    #not a heading",                   // 10
		"a link [broken over",                  // 11
		"lines](g.md#y) and [another](h.md)",   // 12
		"[unclosed",                            // 13
		"",                                     // 14
	}, "\n")
	got := docscheck.Links([]byte(md))
	want := []docscheck.Link{{2, "a.md#x"}, {2, "../b.md"}, {7, "https://example.com/f"}, {9, "pic.png"},
		{11, "g.md#y"}, {11, "h.md"}}
	if !slices.Equal(got, want) {
		t.Errorf("Links = %v, want %v", got, want)
	}
	anchors := docscheck.Anchors([]byte(md))
	for _, a := range []string{"title", "title-1", "here"} {
		if !anchors[a] {
			t.Errorf("Anchors lacks %q: %v", a, anchors)
		}
	}
	if len(anchors) != 3 {
		t.Errorf("Anchors = %v, want 3", anchors)
	}
}

// TestMarkdownLinksResolve: every relative link of the repository's Markdown names a file or directory that
// exists, and every #anchor into a Markdown file names one of its headings. Links to other sites are not followed.
func TestMarkdownLinksResolve(t *testing.T) {
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		t.Fatal(err)
	}
	var docs []string
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root {
			switch d.Name() {
			case "bin", "data", "node_modules", "vendor", "testdata":
				return filepath.SkipDir
			}
			if strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			docs = append(docs, path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) < 5 {
		t.Fatalf("found %d Markdown files under %s: the walk would prove nothing", len(docs), root)
	}
	anchors := map[string]map[string]bool{}
	anchorsOf := func(path string) map[string]bool {
		if a, ok := anchors[path]; ok {
			return a
		}
		md, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		anchors[path] = docscheck.Anchors(md)
		return anchors[path]
	}
	links := 0
	for _, doc := range docs {
		md, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		rel, _ := filepath.Rel(root, doc)
		for _, l := range docscheck.Links(md) {
			u, err := url.Parse(l.Target)
			if err != nil {
				t.Errorf("%s:%d: link %q: %v", rel, l.Line, l.Target, err)
				continue
			}
			if u.Scheme != "" || u.Host != "" {
				continue
			}
			links++
			target := doc
			if u.Path != "" {
				target = filepath.Join(filepath.Dir(doc), filepath.FromSlash(u.Path))
				if _, err := os.Stat(target); err != nil {
					t.Errorf("%s:%d: link %q: no such file or directory", rel, l.Line, l.Target)
					continue
				}
			}
			if u.Fragment != "" && strings.HasSuffix(target, ".md") && !anchorsOf(target)[u.Fragment] {
				trel, _ := filepath.Rel(root, target)
				t.Errorf("%s:%d: link %q: %s has no heading or anchor #%s", rel, l.Line, l.Target, trel, u.Fragment)
			}
		}
	}
	if links == 0 {
		t.Fatal("no relative link found: the check would prove nothing")
	}
}
