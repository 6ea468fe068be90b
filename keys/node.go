package keys

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	yaml "go.yaml.in/yaml/v3"
)

// placeError is a configuration error at a dotted place below the spec (or the sources file). The callers render it
// with their own prefix: ParseSpec as "dedupe: <place>: <msg>", LoadSources as "sources.<id>.dedupe.<place>: <msg>".
type placeError struct {
	place string // relative to the spec; "" for the spec itself
	msg   string
}

func errAt(place, format string, args ...any) *placeError {
	return &placeError{place: place, msg: fmt.Sprintf(format, args...)}
}

// inSpec renders the error as ParseSpec reports it: "dedupe: <place>: <msg>".
func (e *placeError) inSpec() error { return e.below("dedupe", ": ") }

// at renders the error below a dotted place of the sources file: "<parent>.<place>: <msg>".
func (e *placeError) at(parent string) error { return e.below(parent, ".") }

func (e *placeError) below(parent, sep string) error {
	if e.place == "" {
		return fmt.Errorf("%s: %s", parent, e.msg)
	}
	return fmt.Errorf("%s%s%s: %s", parent, sep, e.place, e.msg)
}

// readDocument parses a YAML or JSON document into its root node; nil means the document is empty (no value, or
// only comments and whitespace). A document that is valid JSON is read as JSON, so that JSON escapes YAML does not
// know (surrogate pairs) and JSON duplicate names are handled the same way as in YAML; anything else is YAML.
func readDocument(doc []byte) (*yaml.Node, error) {
	if json.Valid(doc) {
		dec := json.NewDecoder(bytes.NewReader(doc))
		dec.UseNumber()
		return jsonNode(dec, &lineCounter{doc: doc, line: 1})
	}
	dec := yaml.NewDecoder(bytes.NewReader(doc))
	var n yaml.Node
	if err := dec.Decode(&n); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, nil
		}
		return nil, err
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, err
		}
		return nil, errors.New("more than one YAML document (---); give exactly one")
	}
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return nil, nil
		}
		return n.Content[0], nil
	}
	return &n, nil
}

// jsonNode builds the yaml.Node tree of one JSON value (already validated by json.Valid) so that both syntaxes go
// through the same checks.
func jsonNode(dec *json.Decoder, lines *lineCounter) (*yaml.Node, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim: // '{' or '[': a valid document has no other delimiter here
		n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		if t == '{' {
			n.Kind, n.Tag = yaml.MappingNode, "!!map"
		}
		for dec.More() {
			if n.Kind == yaml.MappingNode {
				name, err := dec.Token()
				if err != nil {
					return nil, err
				}
				s, _ := name.(string)
				n.Content = append(n.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s,
					Line: lines.at(dec.InputOffset())})
			}
			v, err := jsonNode(dec, lines)
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, v)
		}
		_, err = dec.Token() // '}' or ']'
		return n, err
	case string:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: t, Style: yaml.DoubleQuotedStyle}, nil
	case json.Number:
		tag := "!!float"
		if _, err := strconv.ParseInt(string(t), 10, 64); err == nil {
			tag = "!!int"
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: string(t)}, nil
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: strconv.FormatBool(t)}, nil
	case nil:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}, nil
	}
	return nil, fmt.Errorf("unexpected token %v", tok)
}

// lineCounter gives JSON names the line they are on, as the YAML parser gives its nodes: offsets only grow while
// a document is read, so each byte is counted once.
type lineCounter struct {
	doc       []byte
	off, line int
}

// at is the line (from 1) of the byte before offset: the end of the token just read.
func (l *lineCounter) at(offset int64) int {
	for end := min(int(offset)-1, len(l.doc)); l.off < end; l.off++ {
		if l.doc[l.off] == '\n' {
			l.line++
		}
	}
	return l.line
}

// deref follows YAML aliases to the node they name.
func deref(n *yaml.Node) *yaml.Node {
	for i := 0; n != nil && n.Kind == yaml.AliasNode && n.Alias != nil && i < 100; i++ {
		n = n.Alias
	}
	return n
}

func isNull(n *yaml.Node) bool {
	return n == nil || (n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null")
}

func isString(n *yaml.Node) bool {
	return n != nil && n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str"
}

// describe names a node's type for error messages, with the value for short scalars.
func describe(n *yaml.Node) string {
	if n == nil {
		return "null"
	}
	switch n.Kind {
	case yaml.MappingNode:
		return "an object"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		v := n.Value
		if len(v) > 40 {
			v = v[:40] + "..."
		}
		switch n.ShortTag() {
		case "!!null":
			return "null"
		case "!!str":
			return strconv.Quote(v)
		case "!!bool":
			return "boolean " + v
		}
		return v
	}
	return "an unsupported YAML node"
}

// member is one key/value pair of a mapping node.
type member struct {
	name  string
	key   *yaml.Node
	value *yaml.Node
}

// members lists a mapping's pairs (what names them in errors: "field" or "source") in order, rejecting non-scalar or null keys, the YAML merge key and names given
// twice (YAML and JSON alike: a duplicate is almost always an editing mistake, and which one wins would be a guess).
func members(n *yaml.Node, place, what string) ([]member, *placeError) {
	out := make([]member, 0, len(n.Content)/2)
	seen := make(map[string]bool, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := deref(n.Content[i]), deref(n.Content[i+1])
		if k == nil || k.Kind != yaml.ScalarNode || isNull(k) {
			return nil, errAt(place, "%s names must be strings", what)
		}
		if k.ShortTag() == "!!merge" {
			return nil, errAt(place, "YAML merge keys (<<) are not supported")
		}
		if seen[k.Value] {
			return nil, errAt(place, "%s %q is given twice", what, k.Value)
		}
		seen[k.Value] = true
		out = append(out, member{name: k.Value, key: k, value: v})
	}
	return out, nil
}
