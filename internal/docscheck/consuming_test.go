package docscheck_test

// docs/consuming.md is the consumers' description of the wire contract: its tables are checked against package
// contract, so that the page and the code cannot drift, and its walkthrough is run like the README's.

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/dedupeworker/dedupeworker/contract"
	"github.com/dedupeworker/dedupeworker/internal/docscheck"
)

const consumingFile = "../../docs/consuming.md"

// tables returns the tables between the heading and the next heading: rows of cells, without the header and
// separator rows, the backquotes of each first cell removed.
func tables(t *testing.T, md, heading string) [][][]string {
	t.Helper()
	i := strings.Index(md, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("%s: no heading %q", consumingFile, heading)
	}
	var out [][][]string
	var rows [][]string
	inTable := false
	for _, line := range strings.Split(md[i+len(heading)+2:], "\n") {
		line = strings.TrimSpace(line)
		if strings.HasPrefix(line, "## ") {
			break
		}
		if !strings.HasPrefix(line, "|") {
			if inTable {
				out, rows, inTable = append(out, rows), nil, false
			}
			continue
		}
		if !inTable { // the header row; the separator row follows
			inTable = true
			continue
		}
		if strings.HasPrefix(line, "| ---") {
			continue
		}
		var cells []string
		for _, c := range strings.Split(strings.Trim(line, "|"), "|") {
			cells = append(cells, strings.TrimSpace(c))
		}
		cells[0] = strings.Trim(cells[0], "`")
		rows = append(rows, cells)
	}
	if inTable {
		out = append(out, rows)
	}
	if len(out) == 0 {
		t.Fatalf("%s: no table after %q", consumingFile, heading)
	}
	return out
}

func consuming(t *testing.T) string {
	t.Helper()
	md, err := os.ReadFile(consumingFile)
	if err != nil {
		t.Fatal(err)
	}
	return string(md)
}

// The header table lists exactly the contract's headers, each on the messages contract.Headers says.
func TestConsumingHeaderTable(t *testing.T) {
	words := map[string]contract.Where{"event": contract.OnEvent, "duplicate": contract.OnDuplicate,
		"dead letter": contract.OnDeadLetter, "envelope": contract.OnEnvelope}
	want := map[string]contract.Where{}
	for _, h := range contract.Headers() {
		want[h.Name] = h.Where
	}
	got := map[string]contract.Where{}
	for _, row := range tables(t, consuming(t), "## Headers")[0] {
		if len(row) != 3 {
			t.Errorf("%s: header row %q: want 3 cells", consumingFile, row)
			continue
		}
		var where contract.Where
		for w := range strings.SplitSeq(row[1], ",") {
			bit, ok := words[strings.TrimSpace(w)]
			if !ok {
				t.Errorf("%s: header %s: %q is not one of event, duplicate, dead letter, envelope", consumingFile, row[0], w)
			}
			where |= bit
		}
		got[row[0]] = where
	}
	for name, w := range want {
		if g, ok := got[name]; !ok {
			t.Errorf("%s: the header table lacks %s", consumingFile, name)
		} else if g != w {
			t.Errorf("%s: header %s is on %04b in the table, %04b in package contract", consumingFile, name, g, w)
		}
	}
	for name := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s: the header table lists %s, which package contract does not name", consumingFile, name)
		}
	}
}

// The tables of Dedupe-Status values, Dedupe-Reason values and dead-letter reasons are the contract's, in its order.
func TestConsumingValueTables(t *testing.T) {
	md := consuming(t)
	first := func(rows [][]string) []string {
		var out []string
		for _, r := range rows {
			out = append(out, r[0])
		}
		return out
	}
	values := tables(t, md, "## Dedupe-Status and Dedupe-Reason")
	if len(values) != 2 {
		t.Fatalf("%s: %d tables of values, want Dedupe-Status's and Dedupe-Reason's", consumingFile, len(values))
	}
	for _, c := range []struct {
		what      string
		got, want []string
	}{
		{"Dedupe-Status values", first(values[0]), []string{contract.StatusUnique, contract.StatusUnkeyed, contract.StatusDuplicate}},
		{"Dedupe-Reason values", first(values[1]), contract.UnkeyedReasons()},
		{"dead-letter reasons", first(tables(t, md, "## Dead letters")[0]), contract.DeadReasons()},
	} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%s: %s are %q, package contract's %q", consumingFile, c.what, c.got, c.want)
		}
	}
}

// TestConsumingWalkthrough runs the page's nats CLI walkthrough against a worker of its own, as
// TestReadmeWalkthroughs does the README's (skipped without the nats CLI unless DOCS_CHECK_REQUIRE=1).
func TestConsumingWalkthrough(t *testing.T) {
	blocks, err := docscheck.Parse([]byte(consuming(t)))
	if err != nil {
		t.Fatalf("%s: %v", consumingFile, err)
	}
	var names []string
	for _, b := range blocks {
		names = append(names, b.Name)
	}
	if !slices.Equal(names, []string{"consuming-terminals", "consuming"}) {
		t.Fatalf("%s: marked blocks %v, want consuming-terminals then consuming", consumingFile, names)
	}
	if testing.Short() {
		t.Skip("docscheck: -short: not running the walkthrough of docs/consuming.md")
	}
	for _, s := range blocks[1].Steps {
		if tool := missingTool(s.Command); tool != "" {
			(&walk{require: os.Getenv("DOCS_CHECK_REQUIRE") == "1"}).skipFor(t, tool,
				fmt.Sprintf("%s line %d: %s", consumingFile, s.Line, s))
		}
	}
	w := newWalk(t)
	w.terminals(t, blocks[0])
	for _, s := range blocks[1].Steps {
		w.settle(t) // the worker is done with what the previous step published, as for a reader who looks a moment later
		out, code, err := w.sh.run(w.rewrite(s.Command))
		if err != nil || code != 0 {
			t.Fatalf("%s line %d: %s: exit %d, %v; it printed:\n%s", consumingFile, s.Line, s, code, err, out)
		}
		for _, e := range s.Expect {
			if piece, ok := docscheck.Match(e, out); !ok {
				t.Errorf("%s line %d: %s: the page says it prints %q; %q is missing from:\n%s", consumingFile, s.Line, s, e, piece, out)
			}
		}
	}
}

// The page's Go code is contract's Example_consume, line for line, so that it compiles with the nats.go the project
// uses.
func TestConsumingGoSnippet(t *testing.T) {
	md := consuming(t)
	start := strings.Index(md, "\n```go\n")
	if start < 0 {
		t.Fatalf("%s: no Go code block", consumingFile)
	}
	end := strings.Index(md[start+7:], "\n```")
	example, err := os.ReadFile("../../contract/example_test.go")
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(string(example), "\n") {
		lines = append(lines, strings.TrimSpace(l))
	}
	at := 0
	for _, l := range strings.Split(md[start+7:start+7+end], "\n") {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		i := slices.Index(lines[at:], l)
		if i < 0 {
			t.Errorf("%s: Go line %q is not in contract/example_test.go (after line %d)", consumingFile, l, at)
			continue
		}
		at += i + 1
	}
}
