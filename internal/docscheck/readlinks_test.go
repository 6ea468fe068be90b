package docscheck

import (
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// Link is one Markdown link of a document: its target as written and the line it is on.
type Link struct {
	Line   int    // 1-based
	Target string // as written between the parentheses, or after a reference definition's colon
}

var (
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	refDef     = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s+<?(\S+?)>?(?:\s+"[^"]*")?\s*$`)
	codeSpan   = regexp.MustCompile("`+[^`]*`+")
	htmlAnchor = regexp.MustCompile(`<a\s+(?:id|name)="([^"]+)"`)
)

// Links lists the links of a Markdown document outside code: fenced blocks, code spans and HTML comments hold
// examples, not links.
func Links(md []byte) []Link {
	var out []Link
	fence := ""
	comment := false
	pending, pendingAt, at := "", 0, 0
	for i, line := range strings.Split(string(md), "\n") {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" {
			pending = "" // a paragraph ends: an unclosed [ was no link
		}
		if inFence(&fence, trimmed) {
			continue
		}
		if comment {
			if _, after, ok := strings.Cut(line, "-->"); ok {
				comment, line = false, after
			} else {
				continue
			}
		}
		if before, _, ok := strings.Cut(line, "<!--"); ok {
			if _, after, closed := strings.Cut(line[len(before):], "-->"); closed {
				line = before + after
			} else {
				comment, line = true, before
			}
		}
		line = codeSpan.ReplaceAllString(line, "")
		if m := refDef.FindStringSubmatch(line); m != nil {
			out = append(out, Link{Line: i + 1, Target: m[1]})
			continue
		}
		if pending != "" { // a link's text broken over lines: read it whole, on the line it starts
			line, at, pending = pending+" "+line, pendingAt, ""
		} else {
			at = i + 1
		}
		if strings.Count(line, "[") > strings.Count(line, "]") && trimmed != "" {
			pending, pendingAt = line, at
			continue
		}
		for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
			out = append(out, Link{Line: at, Target: m[1]})
		}
	}
	return out
}

// inFence follows fenced code blocks line by line, fence being the one open ("" outside): true for a line that
// opens, lies in or closes one.
func inFence(fence *string, trimmed string) bool {
	if *fence != "" {
		if strings.HasPrefix(trimmed, *fence) {
			*fence = ""
		}
		return true
	}
	*fence = fenceOf(trimmed)
	return *fence != ""
}

// fenceOf is the fence a line opens (``` or ~~~, as long as written), or "".
func fenceOf(trimmed string) string {
	for _, c := range []string{"`", "~"} {
		if strings.HasPrefix(trimmed, c+c+c) {
			return strings.Repeat(c, len(trimmed)-len(strings.TrimLeft(trimmed, c)))
		}
	}
	return ""
}

// Anchors are the fragments a link into the document may name: each heading's, made as GitHub makes them
// (lower case; letters, digits, `-`, `_` and spaces kept, spaces as `-`; a repeated one numbered -1, -2, …), and
// every <a id="…"> or <a name="…">.
func Anchors(md []byte) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	fence := ""
	for _, line := range strings.Split(string(md), "\n") {
		trimmed := strings.TrimSpace(line)
		if inFence(&fence, trimmed) {
			continue
		}
		for _, m := range htmlAnchor.FindAllStringSubmatch(line, -1) {
			out[m[1]] = true
		}
		if !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimLeft(line, "#")
		if len(line)-len(text) > 6 || (text != "" && text[0] != ' ') {
			continue
		}
		slug := Slug(text)
		n := seen[slug]
		seen[slug]++
		if n > 0 {
			slug += "-" + strconv.Itoa(n)
		}
		out[slug] = true
	}
	return out
}

// Slug is the anchor GitHub gives a heading's text.
func Slug(heading string) string {
	heading = inlineLink.ReplaceAllStringFunc(heading, func(s string) string {
		return s[strings.Index(s, "[")+1 : strings.Index(s, "]")]
	})
	heading = strings.TrimSpace(strings.ToLower(heading))
	var b strings.Builder
	for _, r := range heading {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.Is(unicode.Mn, r) ||
			unicode.Is(unicode.Mc, r) || unicode.Is(unicode.Pc, r):
			b.WriteRune(r)
		}
	}
	return b.String()
}
