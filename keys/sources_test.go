package keys_test

import (
	"errors"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/keys"
)

const sourcesYAML = `
# the example from the README
sources:
  github:   {dedupe: github}
  stripe:   {dedupe: {preset: stripe, ttl: 48h}}
  orders:   {dedupe: {json: data.order.id}}
  billing:  {dedupe: {header: X-Event-Id, ttl_seconds: 86400}}
  forms:    {dedupe: {payload: {except: [.submitted_at]}}}
  legacy:   {}
`

const sourcesJSON = `{
  "sources": {
    "github":  {"dedupe": "github"},
    "stripe":  {"dedupe": {"preset": "stripe", "ttl": "48h"}},
    "orders":  {"dedupe": {"json": "data.order.id"}},
    "billing": {"dedupe": {"header": "X-Event-Id", "ttl_seconds": 86400}},
    "forms":   {"dedupe": {"payload": {"except": [".submitted_at"]}}},
    "legacy":  {}
  }
}`

const sourcesBlockYAML = `
sources:
  github:
    dedupe: github
  stripe:
    dedupe:
      preset: stripe
      ttl: 48h
  orders:
    dedupe:
      json: data.order.id
  billing:
    dedupe:
      header: X-Event-Id
      ttl_seconds: 86400
  forms:
    dedupe:
      payload:
        except:
          - .submitted_at
  legacy:
`

func TestLoadSources(t *testing.T) {
	want := map[string]string{
		"github":  "header X-GitHub-Delivery (preset github), ttl 24h (default)",
		"stripe":  "json id (preset stripe), ttl 48h",
		"orders":  "json data.order.id, ttl 24h (default)",
		"billing": "header X-Event-Id, ttl 24h",
		"forms":   "payload digest except [.submitted_at], ttl 24h (default)",
		"legacy":  "no dedupe",
	}
	for name, doc := range map[string]string{"yaml flow": sourcesYAML, "json": sourcesJSON, "yaml block": sourcesBlockYAML} {
		t.Run(name, func(t *testing.T) {
			s, err := keys.LoadSources([]byte(doc))
			if err != nil {
				t.Fatal(err)
			}
			if got := s.IDs(); !reflect.DeepEqual(got, []string{"billing", "forms", "github", "legacy", "orders", "stripe"}) {
				t.Errorf("IDs() = %v", got)
			}
			if !reflect.DeepEqual(s.WithoutDedupe, []string{"legacy"}) {
				t.Errorf("WithoutDedupe = %v", s.WithoutDedupe)
			}
			for id, desc := range want {
				spec, ok := s.Lookup(id)
				if !ok {
					t.Errorf("Lookup(%s): not declared", id)
					continue
				}
				if got := spec.Describe(24 * time.Hour); got != desc {
					t.Errorf("%s: %q, want %q", id, got, desc)
				}
			}
			if _, ok := s.Lookup("other"); ok {
				t.Error("Lookup(other) found an undeclared source")
			}
			legacy, _ := s.Lookup("legacy")
			if key, reason := (keys.Extractor{}).Extract(legacy, nil, []byte(`{"id":"x"}`)); key != "" || reason != keys.ReasonNoDedupe {
				t.Errorf("legacy: %q, %q", key, reason)
			}
			orders, _ := s.Lookup("orders")
			if key, _ := (keys.Extractor{}).Extract(orders, nil, []byte(`{"data":{"order":{"id":1001}}}`)); key != "1001" {
				t.Errorf("orders key %q", key)
			}
		})
	}
}

func TestLoadSourcesEmpty(t *testing.T) {
	for _, doc := range []string{"", "\n# nothing yet\n", "sources: {}", "sources:", "sources: ~", `{}`, `{"sources":{}}`, "null"} {
		s, err := keys.LoadSources([]byte(doc))
		if err != nil {
			t.Errorf("LoadSources(%q): %v", doc, err)
			continue
		}
		if len(s.IDs()) != 0 || len(s.WithoutDedupe) != 0 {
			t.Errorf("LoadSources(%q): %v, %v", doc, s.IDs(), s.WithoutDedupe)
		}
		if _, ok := s.Lookup("x"); ok {
			t.Errorf("LoadSources(%q): Lookup found x", doc)
		}
	}
}

func TestLoadSourcesIDs(t *testing.T) {
	s, err := keys.LoadSources([]byte("sources:\n  a: {}\n  Z_9-x: {}\n  " + strings.Repeat("x", 64) + ": {dedupe: svix}\n  m: ~\n  123: {}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.WithoutDedupe, []string{"123", "Z_9-x", "a", "m"}; !reflect.DeepEqual(got, want) {
		t.Errorf("WithoutDedupe = %v, want %v", got, want)
	}
	if got := len(s.IDs()); got != 5 {
		t.Errorf("%d ids", got)
	}
}

// TestLoadSourcesSpecErrors: every spec error carries the sources.<id>.dedupe place in a sources file.
func TestLoadSourcesSpecErrors(t *testing.T) {
	for _, c := range specErrors {
		want := "sources.src.dedupe: " + c.msg
		if c.place != "" {
			want = "sources.src.dedupe." + c.place + ": " + c.msg
		}
		doc := "sources:\n  ok: {dedupe: github}\n  src:\n    dedupe: " + c.doc + "\n"
		if strings.HasPrefix(c.doc, `{"`) { // JSON specs in a JSON file
			doc = `{"sources":{"ok":{"dedupe":"github"},"src":{"dedupe":` + c.doc + `}}}`
		}
		_, err := keys.LoadSources([]byte(doc))
		checkErr(t, "LoadSources(..."+c.doc+")", withoutLine(err), want) // the line: TestLoadSourcesErrorLine
	}
}

func TestLoadSourcesErrors(t *testing.T) {
	for _, c := range []struct{ doc, want string }{
		{"sources:\n  orders: {dedupe: {json: data..id}}\n", `sources.orders.dedupe.json: segment 2 is empty in "data..id"`},
		{"sources:\n  stripe: {dedupe: {preset: stripe, ttl: 500ms}}\n", `sources.stripe.dedupe.ttl: must be at least 1s, got 500ms`},
		{"sources:\n  bad.id: {dedupe: github}\n", `sources.bad.id: invalid source id "bad.id": use 1-64 characters of A-Z, a-z, 0-9, _ and -`},
		{"sources:\n  'a b': {}\n", `sources.a b: invalid source id "a b": use 1-64 characters of A-Z, a-z, 0-9, _ and -`},
		{"sources:\n  '': {}\n", `sources.: invalid source id "": use 1-64 characters of A-Z, a-z, 0-9, _ and -`},
		{"sources:\n  " + strings.Repeat("x", 65) + ": {}\n", "sources." + strings.Repeat("x", 65) + `: invalid source id "` + strings.Repeat("x", 65) + `": use 1-64 characters of A-Z, a-z, 0-9, _ and -`},
		{"sources:\n  a>: {}\n", `sources.a>: invalid source id "a>": use 1-64 characters of A-Z, a-z, 0-9, _ and -`},
		{"source:\n  github: {dedupe: github}\n", `sources file: unknown field "source" (valid: sources)`},
		{"sources: {}\nversion: 1\n", `sources file: unknown field "version" (valid: sources)`},
		{`{"sources":{},"extra":1}`, `sources file: unknown field "extra" (valid: sources)`},
		{"sources:\n  github: {dedup: github}\n", `sources.github: unknown field "dedup" (valid: dedupe, verify, on_invalid)`},
		{"sources:\n  github: {dedupe: github, subject: x}\n", `sources.github: unknown field "subject" (valid: dedupe, verify, on_invalid)`},
		{"sources:\n  github: github\n", `sources.github: must be an object such as {dedupe: github}, got "github"`},
		{"sources:\n  github: [dedupe]\n", `sources.github: must be an object such as {dedupe: github}, got a list`},
		{"sources:\n  github: {dedupe: }\n", "sources.github.dedupe: is empty: give a preset name (github, salesforce, shopify, standard_webhooks, stripe, svix) or an object with one of preset, header, json or payload"},
		{"sources:\n  github: {dedupe: gitlab}\n", `sources.github.dedupe: unknown preset "gitlab" ` + validPresets},
		{"sources:\n  forms: {dedupe: {payload: {except: ['.a[x]']}}}\n", `sources.forms.dedupe.payload.except[0]: path ".a[x]"...`},
		{"sources:\n  github: {dedupe: github}\n  github: {}\n", `sources: source "github" is given twice`},
		{`{"sources":{"a":{},"a":{}}}`, `sources: source "a" is given twice`},
		{"sources:\n  github: {dedupe: github, dedupe: svix}\n", `sources.github: field "dedupe" is given twice`},
		{"sources: [github]\n", "sources: must be an object of source id to source, got a list"},
		{"sources: github\n", `sources: must be an object of source id to source, got "github"`},
		{"- github\n", "sources file: must be an object with a \"sources\" field, got a list"},
		{"github\n", "sources file: must be an object with a \"sources\" field, got \"github\""},
		{"sources: {\n", "sources file: yaml: ..."},
		{"sources:\n\tgithub: {}\n", "sources file: yaml: ..."},
		{"sources: {}\n---\nsources: {}\n", "sources file: more than one YAML document (---); give exactly one"},
		{"sources:\n  [a]: {}\n", "sources: source names must be strings"},
		{"sources:\n  ~: {}\n", "sources: source names must be strings"},
	} {
		s, err := keys.LoadSources([]byte(c.doc))
		checkErr(t, "LoadSources("+c.doc+")", withoutLine(err), c.want) // the line: TestLoadSourcesErrorLine
		if err != nil && (s.Specs != nil || s.WithoutDedupe != nil) {
			t.Errorf("LoadSources(%q): non-zero Sources with an error", c.doc)
		}
	}
}

// withoutLine is err without the "line N: " that LoadSources puts before an error about a source.
func withoutLine(err error) error {
	if err == nil {
		return nil
	}
	if m := regexp.MustCompile(`^line \d+: `).FindString(err.Error()); m != "" {
		return errors.New(strings.TrimPrefix(err.Error(), m))
	}
	return err
}

// An error about a source carries the line of the field at fault, or of the source's id when it is about the
// source as a whole, as YAML syntax errors and the receiver's errors about verify blocks do.
func TestLoadSourcesErrorLine(t *testing.T) {
	for _, c := range []struct{ doc, want string }{
		{"# acme\nsources:\n  github: {dedupe: github}\n  orders:\n    dedupe: {json: data..id}\n",
			`line 5: sources.orders.dedupe.json: segment 2 is empty in "data..id"`},
		{"sources:\n  orders:\n    dedupe: github\n    secret: x\n", "line 4: sources.orders.secret: secrets are never read"},
		{"sources:\n  github: github\n", `line 2: sources.github: must be an object such as {dedupe: github}, got "github"`},
		{"sources:\n  ok: {}\n  bad.id: {}\n", `line 3: sources.bad.id: invalid source id "bad.id"`},
		{"sources:\n  a:\n    on_invalid: drop\n", `line 3: sources.a.on_invalid: must be reject or forward, got "drop"`},
	} {
		_, err := keys.LoadSources([]byte(c.doc))
		if err == nil || !strings.HasPrefix(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q...", c.doc, err, c.want)
		}
	}
}
