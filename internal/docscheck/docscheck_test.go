package docscheck_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/dedupeworker/dedupeworker/internal/docscheck"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name string
		md   string
		want []docscheck.Block
		err  string
	}{
		{
			name: "indented steps with expected output and a continuation",
			md:   "Intro\n\n<!-- docs-check: one -->\n\n    A=1\n    curl -i x \\\n      -d y\n    # HTTP/1.1 202 ... seq\n\n    echo $A\n\nAfter\n",
			want: []docscheck.Block{{Name: "one", Mode: docscheck.Steps, Line: 3, Steps: []docscheck.Step{
				{Line: 5, Command: "A=1"},
				{Line: 6, Command: "curl -i x \\\n  -d y", Expect: []string{"HTTP/1.1 202 ... seq"}},
				{Line: 10, Command: "echo $A"},
			}}},
		},
		{
			name: "fenced terminals",
			md:   "<!-- docs-check: t terminals -->\n```sh\nmake run   # 1\nnats sub 'x.>'\n```\n",
			want: []docscheck.Block{{Name: "t", Mode: docscheck.Terminals, Line: 1, Steps: []docscheck.Step{
				{Line: 3, Command: "make run   # 1"}, {Line: 4, Command: "nats sub 'x.>'"},
			}}},
		},
		{
			name: "paced steps",
			md:   "<!-- docs-check: p paced -->\n    a\n    b\n",
			want: []docscheck.Block{{Name: "p", Mode: docscheck.Steps, Paced: true, Line: 1, Steps: []docscheck.Step{
				{Line: 2, Command: "a"}, {Line: 3, Command: "b"},
			}}},
		},
		{
			name: "unmarked blocks are not read",
			md:   "    rm -rf /\n\n<!-- docs-check: a -->\n    true\n\n    false\n",
			want: []docscheck.Block{{Name: "a", Mode: docscheck.Steps, Line: 3, Steps: []docscheck.Step{
				{Line: 4, Command: "true"}, {Line: 6, Command: "false"},
			}}},
		},
		{name: "marker without a block", md: "<!-- docs-check: a -->\n\nprose\n", err: "line 3 follows the marker"},
		{name: "marker at the end", md: "<!-- docs-check: a -->\n", err: "no code block"},
		{name: "bad marker", md: "<!-- docs-check: a b c -->\n    x\n", err: "is not <!-- docs-check"},
		{name: "name twice", md: "<!-- docs-check: a -->\n    x\n\n<!-- docs-check: a -->\n    y\n", err: `"a" already used on line 1`},
		{name: "output first", md: "<!-- docs-check: a -->\n    # out\n    x\n", err: "before any command"},
		{name: "output in terminals", md: "<!-- docs-check: a terminals -->\n    x\n    # out\n", err: "no expected output"},
		{name: "dangling continuation", md: "<!-- docs-check: a -->\n    x \\\n", err: "ends in a backslash"},
		{name: "unclosed fence", md: "<!-- docs-check: a -->\n```\nx\n", err: "never closed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := docscheck.Parse([]byte(tt.md))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) || !strings.HasPrefix(err.Error(), "docscheck: ") {
					t.Fatalf("Parse: err = %v, want one containing %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("Parse:\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestMatch(t *testing.T) {
	tests := []struct {
		expect, output string
		ok             bool
	}{
		{"HTTP/1.1 202 Accepted ... accepted: INGEST seq ...", "HTTP/1.1 202 Accepted\r\nDate: x\r\n\r\naccepted: INGEST seq 7", true},
		{"HTTP/1.1 202 Accepted ... accepted: INGEST seq", "HTTP/1.1 401 Unauthorized\r\n\r\nsignature mismatch", false},
		{"a ... b", "b a", false}, // in order
		{"one two", "one\n   two", true},
		{"...", "", true},
		{`{"key":"1234"}`, `{"key":"1234"}` + "\n", true},
	}
	for _, tt := range tests {
		if _, ok := docscheck.Match(tt.expect, tt.output); ok != tt.ok {
			t.Errorf("Match(%q, %q) = %v, want %v", tt.expect, tt.output, ok, tt.ok)
		}
	}
}

// FuzzParse: any document parses or fails with an error; every step of a parsed block has a command.
func FuzzParse(f *testing.F) {
	f.Add([]byte("<!-- docs-check: a -->\n    x \\\n    y\n    # out ... more\n"))
	f.Add([]byte("<!-- docs-check: b terminals -->\n```\nmake run\n```\n"))
	f.Add([]byte("<!-- docs-check: c -->\n\n\n"))
	f.Fuzz(func(t *testing.T, md []byte) {
		blocks, err := docscheck.Parse(md)
		if err != nil {
			return
		}
		for _, b := range blocks {
			if len(b.Steps) == 0 {
				t.Fatalf("block %s without steps", b.Name)
			}
			for _, s := range b.Steps {
				if strings.TrimSpace(s.Command) == "" {
					t.Fatalf("block %s: empty command at line %d", b.Name, s.Line)
				}
				for _, e := range s.Expect {
					docscheck.Match(e, s.Command)
				}
			}
		}
	})
}
