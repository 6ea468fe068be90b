package keys_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/dedupeworker/dedupeworker/keys"
)

// A YAML syntax error names the line of the file it is on, counted as editors and grep -n count (1-based, one per
// '\n'), not the 0-based line of the enclosing construct that the YAML library reports by itself.
func TestLoadSourcesSyntaxErrorLine(t *testing.T) {
	for _, c := range []struct {
		name, doc, want string
	}{
		{"over-indented key after comments", "# sources\n\n# of acme\nsources:\n  github: {dedupe: github}\n   stripe: {dedupe: stripe}\n",
			"sources file: yaml: line 6: did not find expected key"}, // the library alone says line 4
		{"under-indented key", "sources:\n  github: {dedupe: github}\n stripe: {}\n",
			"sources file: yaml: line 3: did not find expected key"},
		{"list item in a mapping", "sources:\n  github:\n    dedupe: github\n  - stripe\n",
			"sources file: yaml: line 4: did not find expected key"},
		{"CRLF line ends", "sources:\r\n  github: {dedupe: github}\r\n   stripe: {}\r\n",
			"sources file: yaml: line 3: did not find expected key"},
		{"tab indentation", "sources:\n\tgithub: {}\n",
			"sources file: yaml: line 2: found character that cannot start any token"},
		{"brace left open", "sources:\n  github: {dedupe: github}\n  orders: {dedupe: {json: data.id}\n  stripe: {}\n\n\n",
			"sources file: yaml: line 3: did not find expected ',' or '}'"},
		{"quote left open", "sources:\n  github: {dedupe: github}\n  orders: {dedupe: {json: \"data.id}}\n  stripe: {}\n",
			"sources file: yaml: line 3: found unexpected end of stream"},
		{"error on the first line", "sources: {]\n",
			"sources file: yaml: line 1: did not find expected node content"},
		{"second document", "sources: {}\n---\nsources: [\n",
			"sources file: yaml: line 3: did not find expected node content"},
		{"no line from the library at all", "# aliases\nsources: *defaults\n",
			"sources file: yaml: line 2: unknown anchor 'defaults' referenced"},
	} {
		_, err := keys.LoadSources([]byte(c.doc))
		if err == nil || err.Error() != c.want {
			t.Errorf("%s:\n got  %v\n want %s", c.name, err, c.want)
		}
	}
}

// A fault at the end of a long file is found too (the search parses prefixes, only when the file does not parse).
func TestLoadSourcesSyntaxErrorLineLongFile(t *testing.T) {
	var b strings.Builder
	b.WriteString("sources:\n")
	for i := range 500 {
		b.WriteString("  s" + strconv.Itoa(i) + ": {dedupe: github}\n")
	}
	b.WriteString("   late: {}\n")
	_, err := keys.LoadSources([]byte(b.String()))
	if want := "sources file: yaml: line 502: did not find expected key"; err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
}
