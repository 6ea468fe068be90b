package docscheck

import (
	"bufio"
	"bytes"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Mode says how a block's commands run.
type Mode string

const (
	// Steps run one after the other in one shell, so variables set by one step are seen by the next.
	Steps Mode = "steps"
	// Terminals are long-running commands, each in its own terminal (process), started in order.
	Terminals Mode = "terminals"
)

// PersonPause is how long a person takes between two steps of a paced block: reading the output, typing the
// next command. A step that works only when run at once (before the worker has seen what the previous one
// changed) or only after a longer wait is not what a reader meets.
const PersonPause = 2500 * time.Millisecond

// Block is one marked walkthrough.
type Block struct {
	Name  string
	Mode  Mode
	Line  int  // the marker's line, 1-based
	Paced bool // a steps block run at a person's pace: PersonPause before each step after the first
	Steps []Step
}

// Step is one command of a block, with what it is said to print.
type Step struct {
	Line    int    // the command's first line, 1-based
	Command string // its lines, continuations kept as they are ("\\\n"), so a shell reads it as written
	Expect  []string
}

// String is the command on one line, for messages.
func (s Step) String() string {
	return strings.Join(strings.Fields(strings.ReplaceAll(s.Command, "\\\n", " ")), " ")
}

var (
	markerRE = regexp.MustCompile(`^<!--\s*docs-check:\s*([A-Za-z0-9_-]+)(?:\s+(steps|paced|terminals))?\s*-->\s*$`)
	fenceRE  = regexp.MustCompile("^(```+|~~~+)")
)

// Parse returns the marked blocks of a Markdown document in order. A marker not followed by a code block, a name
// used twice, an unknown marker form and a block without a command are errors naming the line.
func Parse(md []byte) ([]Block, error) {
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(md))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("docscheck: reading the document: %w", err)
	}
	var out []Block
	seen := map[string]int{}
	for i := 0; i < len(lines); i++ {
		trimmed := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(trimmed, "<!--") || !strings.Contains(trimmed, "docs-check") {
			continue
		}
		m := markerRE.FindStringSubmatch(trimmed)
		if m == nil {
			return nil, fmt.Errorf("docscheck: line %d: marker %q is not <!-- docs-check: NAME [steps|paced|terminals] -->", i+1, trimmed)
		}
		b := Block{Name: m[1], Mode: Mode(m[2]), Line: i + 1}
		if b.Mode == "" || b.Mode == "paced" {
			b.Paced, b.Mode = b.Mode == "paced", Steps
		}
		if prev, ok := seen[b.Name]; ok {
			return nil, fmt.Errorf("docscheck: line %d: block name %q already used on line %d", i+1, b.Name, prev)
		}
		seen[b.Name] = b.Line
		body, first, next, err := codeBlock(lines, i+1)
		if err != nil {
			return nil, fmt.Errorf("docscheck: line %d: block %s: %w", i+1, b.Name, err)
		}
		b.Steps, err = steps(body, first, b.Mode)
		if err != nil {
			return nil, fmt.Errorf("docscheck: block %s: %w", b.Name, err)
		}
		out = append(out, b)
		i = next - 1
	}
	return out, nil
}

// codeBlock finds the code block that starts after blank lines at lines[from]: its lines without the indentation
// or fences, the 1-based line of its first line, and the index after it.
func codeBlock(lines []string, from int) (body []string, first, next int, err error) {
	i := from
	for i < len(lines) && strings.TrimSpace(lines[i]) == "" {
		i++
	}
	if i == len(lines) {
		return nil, 0, 0, fmt.Errorf("no code block follows the marker")
	}
	if f := fenceRE.FindString(strings.TrimSpace(lines[i])); f != "" {
		for j := i + 1; j < len(lines); j++ {
			if strings.HasPrefix(strings.TrimSpace(lines[j]), f) {
				return lines[i+1 : j], i + 2, j + 1, nil
			}
		}
		return nil, 0, 0, fmt.Errorf("the fenced block on line %d is never closed", i+1)
	}
	if !strings.HasPrefix(lines[i], "    ") {
		return nil, 0, 0, fmt.Errorf("line %d follows the marker, not a code block (indented by four spaces, or fenced)", i+1)
	}
	j := i
	for j < len(lines) && (strings.HasPrefix(lines[j], "    ") || strings.TrimSpace(lines[j]) == "") {
		j++
	}
	for j > i && strings.TrimSpace(lines[j-1]) == "" { // blank lines after the block belong to the prose
		j--
	}
	for _, l := range lines[i:j] {
		body = append(body, strings.TrimPrefix(l, "    "))
	}
	return body, i + 1, j, nil
}

// steps splits a block's lines into commands and their expected output.
func steps(body []string, first int, mode Mode) ([]Step, error) {
	var out []Step
	for k := 0; k < len(body); k++ {
		line := body[k]
		t := strings.TrimSpace(line)
		switch {
		case t == "":
			continue
		case t == "#" || strings.HasPrefix(t, "# "):
			if mode == Terminals {
				return nil, fmt.Errorf("line %d: a terminals block has no expected output (%q)", first+k, t)
			}
			if len(out) == 0 {
				return nil, fmt.Errorf("line %d: expected output %q before any command", first+k, t)
			}
			out[len(out)-1].Expect = append(out[len(out)-1].Expect, strings.TrimSpace(strings.TrimPrefix(t, "#")))
			continue
		}
		s := Step{Line: first + k, Command: line}
		for strings.HasSuffix(strings.TrimRight(body[k], " \t"), `\`) {
			if k+1 == len(body) {
				return nil, fmt.Errorf("line %d: the last line continues (ends in a backslash)", first+k)
			}
			k++
			s.Command = strings.TrimRight(s.Command, " \t") + "\n" + body[k]
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no command in the block")
	}
	return out, nil
}

// Match reports whether output shows what expect says: the pieces of expect between "..." appear in output in
// that order (runs of spaces in a piece match any run of white space, so a wrapped line still matches). It returns
// the first piece not found.
func Match(expect, output string) (missing string, ok bool) {
	rest := output
	for _, piece := range strings.Split(expect, "...") {
		piece = strings.TrimSpace(piece)
		if piece == "" {
			continue
		}
		re := regexp.MustCompile(wsRE.ReplaceAllString(regexp.QuoteMeta(piece), `\s+`))
		loc := re.FindStringIndex(rest)
		if loc == nil {
			return piece, false
		}
		rest = rest[loc[1]:]
	}
	return "", true
}

var wsRE = regexp.MustCompile(`\s+`)
