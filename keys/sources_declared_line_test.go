package keys_test

import (
	"testing"

	"github.com/dedupeworker/dedupeworker/keys"
)

// Each source knows the line its id is written on, in YAML and JSON alike, so that an error about the source as a
// whole (the receiver's "no verify block") can point there.
func TestSourcesLine(t *testing.T) {
	for _, c := range []struct {
		name, doc string
		want      map[string]int
	}{
		{"yaml", "# sources\nsources:\n  github: {dedupe: github}\n\n  orders:\n    dedupe: {json: id}\n  legacy:\n", map[string]int{"github": 3, "orders": 5, "legacy": 7}},
		{"json over lines", "{\n  \"sources\": {\n    \"a\": {},\n    \"b\": {\"dedupe\": \"github\"}\n  }\n}\n", map[string]int{"a": 3, "b": 4}},
		{"json on one line", `{"sources": {"a": {}, "b": {}}}`, map[string]int{"a": 1, "b": 1}},
	} {
		src, err := keys.LoadSources([]byte(c.doc))
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if len(src.Line) != len(c.want) {
			t.Errorf("%s: Line = %v, want %v", c.name, src.Line, c.want)
		}
		for id, line := range c.want {
			if got := src.Line[id]; got != line {
				t.Errorf("%s: sources.%s on line %d, want %d", c.name, id, got, line)
			}
		}
	}
}
