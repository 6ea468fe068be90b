package keys_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/keys"
)

const validPresets = "(valid presets: github, salesforce, shopify, standard_webhooks, stripe, svix)"

func TestPresets(t *testing.T) {
	want := []string{"github", "salesforce", "shopify", "standard_webhooks", "stripe", "svix"}
	if got := keys.Presets(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Presets() = %v, want %v", got, want)
	}
	keys.Presets()[0] = "changed" // callers get a copy
	if keys.Presets()[0] != "github" {
		t.Fatal("Presets() shares its slice")
	}
	ps := keys.PresetSources()
	if !reflect.DeepEqual(ps.IDs(), want) || len(ps.WithoutDedupe) != 0 {
		t.Fatalf("PresetSources: ids %v, without dedupe %v", ps.IDs(), ps.WithoutDedupe)
	}
	for _, c := range []struct {
		preset string
		kind   keys.Kind
		target string
	}{
		{"github", keys.KindHeader, "X-GitHub-Delivery"},
		{"standard_webhooks", keys.KindHeader, "webhook-id"},
		{"svix", keys.KindHeader, "svix-id"},
		{"shopify", keys.KindHeader, "X-Shopify-Webhook-Id"},
		{"stripe", keys.KindJSON, "id"},
		{"salesforce", keys.KindJSON, "id"},
	} {
		s, ok := ps.Lookup(c.preset)
		if !ok {
			t.Fatalf("PresetSources has no %s", c.preset)
		}
		target := s.Header()
		if c.kind == keys.KindJSON {
			target = s.JSONPath()
		}
		if s.Kind() != c.kind || target != c.target || s.Preset() != c.preset || !s.Enabled() {
			t.Errorf("preset %s: kind %v target %q preset %q", c.preset, s.Kind(), target, s.Preset())
		}
		if _, own := s.OwnTTL(); own || s.TTL(time.Hour) != time.Hour {
			t.Errorf("preset %s: has its own TTL", c.preset)
		}
		for _, doc := range []string{c.preset, `"` + c.preset + `"`, "{preset: " + c.preset + "}", `{"preset":"` + c.preset + `"}`} {
			p := mustSpec(t, doc)
			if p.String() != s.String() {
				t.Errorf("ParseSpec(%s) = %s, want %s", doc, p, s)
			}
		}
	}
}

func TestParseSpec(t *testing.T) {
	for _, c := range []struct {
		doc     string
		str     string // String()
		ttl     time.Duration
		ownTTL  bool
		kind    keys.Kind
		preset  string
		header  string
		jsonP   string
		only    []string
		except  []string
		comment string
	}{
		{doc: "github", str: "header X-GitHub-Delivery (preset github), ttl 72h", kind: keys.KindHeader, preset: "github", header: "X-GitHub-Delivery"},
		{doc: "  stripe\n", str: "json id (preset stripe), ttl 72h", kind: keys.KindJSON, preset: "stripe", jsonP: "id"},
		{doc: "{preset: stripe, ttl: 48h}", str: "json id (preset stripe), ttl 48h", ttl: 48 * time.Hour, ownTTL: true, kind: keys.KindJSON, preset: "stripe", jsonP: "id"},
		{doc: `{"preset":"shopify","ttl_seconds":3600}`, str: "header X-Shopify-Webhook-Id (preset shopify), ttl 1h", ttl: time.Hour, ownTTL: true, kind: keys.KindHeader, preset: "shopify", header: "X-Shopify-Webhook-Id"},
		{doc: "{header: X-Event-Id, ttl_seconds: 86400}", str: "header X-Event-Id, ttl 24h", ttl: 24 * time.Hour, ownTTL: true, kind: keys.KindHeader, header: "X-Event-Id"},
		{doc: "{header: x-event-id}", str: "header x-event-id, ttl 72h", kind: keys.KindHeader, header: "x-event-id"},
		{doc: `{"json":"data.id"}`, str: "json data.id, ttl 72h", kind: keys.KindJSON, jsonP: "data.id"},
		{doc: "json: data.object.id\nttl: 90s\n", str: "json data.object.id, ttl 1m30s", ttl: 90 * time.Second, ownTTL: true, kind: keys.KindJSON, jsonP: "data.object.id"},
		{doc: `{json: '.["dotted.key"]'}`, str: `json .["dotted.key"], ttl 72h`, kind: keys.KindJSON, jsonP: `.["dotted.key"]`},
		{doc: `{json: .a.b}`, str: `json .a.b, ttl 72h`, kind: keys.KindJSON, jsonP: `.a.b`},
		{doc: "{payload: {}}", str: "payload digest, ttl 72h", kind: keys.KindPayload},
		{doc: "{payload: }", str: "payload digest, ttl 72h", kind: keys.KindPayload, comment: "null payload is {}"},
		{doc: "{payload: {except: [.ts]}}", str: "payload digest except [.ts], ttl 72h", kind: keys.KindPayload, except: []string{".ts"}},
		{doc: `{"payload":{"only":[".user.id",".type"]},"ttl":"1h30m"}`, str: "payload digest only [.user.id, .type], ttl 1h30m", ttl: 90 * time.Minute, ownTTL: true, kind: keys.KindPayload, only: []string{".user.id", ".type"}},
		{doc: "{json: id, ttl: 1s}", str: "json id, ttl 1s", ttl: time.Second, ownTTL: true, kind: keys.KindJSON, jsonP: "id"},
		{doc: "{json: id, ttl: 1000ms}", str: "json id, ttl 1s", ttl: time.Second, ownTTL: true, kind: keys.KindJSON, jsonP: "id"},
		{doc: "{json: id, ttl_seconds: 0x10}", str: "json id, ttl 16s", ttl: 16 * time.Second, ownTTL: true, kind: keys.KindJSON, jsonP: "id"},
		{doc: "# a comment\n{json: id} # another\n", str: "json id, ttl 72h", kind: keys.KindJSON, jsonP: "id"},
		{doc: "{\n\t\"json\": \"a.\\ud83d\\ude00\"\n}", str: "json a.😀, ttl 72h", kind: keys.KindJSON, jsonP: "a.😀", comment: "JSON-only escapes"},
		{doc: "&x {json: id}", str: "json id, ttl 72h", kind: keys.KindJSON, jsonP: "id"},
	} {
		s, err := keys.ParseSpec([]byte(c.doc))
		if err != nil {
			t.Errorf("ParseSpec(%q): %v", c.doc, err)
			continue
		}
		only, except := s.PayloadPaths()
		ownTTL, own := s.OwnTTL()
		if s.String() != c.str || s.Kind() != c.kind || s.Preset() != c.preset || s.Header() != c.header ||
			s.JSONPath() != c.jsonP || !reflect.DeepEqual(only, c.only) || !reflect.DeepEqual(except, c.except) ||
			ownTTL != c.ttl || own != c.ownTTL || !s.Enabled() {
			t.Errorf("ParseSpec(%q) = %q kind %v preset %q header %q json %q only %q except %q ttl %v/%v",
				c.doc, s, s.Kind(), s.Preset(), s.Header(), s.JSONPath(), only, except, ownTTL, own)
		}
		wantTTL := c.ttl
		if !c.ownTTL {
			wantTTL = 5 * time.Minute
		}
		if got := s.TTL(5 * time.Minute); got != wantTTL {
			t.Errorf("ParseSpec(%q).TTL(5m) = %v, want %v", c.doc, got, wantTTL)
		}
	}
}

func TestSpecDescribe(t *testing.T) {
	for _, c := range []struct {
		doc  string
		def  time.Duration
		want string
	}{
		{"github", keys.DefaultTTL, "header X-GitHub-Delivery (preset github), ttl 72h (default)"},
		{"github", 24 * time.Hour, "header X-GitHub-Delivery (preset github), ttl 24h (default)"},
		{"{preset: stripe, ttl: 48h}", 24 * time.Hour, "json id (preset stripe), ttl 48h"},
		{"{header: X-Id, ttl_seconds: 3661}", time.Hour, "header X-Id, ttl 1h1m1s"},
	} {
		if got := mustSpec(t, c.doc).Describe(c.def); got != c.want {
			t.Errorf("Describe(%s, %v) = %q, want %q", c.doc, c.def, got, c.want)
		}
	}
	var zero keys.Spec
	if zero.String() != "no dedupe" || zero.Describe(time.Hour) != "no dedupe" || zero.Enabled() || zero.Kind() != keys.KindNone {
		t.Errorf("zero Spec: %q %q %v %v", zero.String(), zero.Describe(time.Hour), zero.Enabled(), zero.Kind())
	}
	if zero.TTL(time.Hour) != time.Hour {
		t.Errorf("zero Spec TTL(1h) = %v", zero.TTL(time.Hour))
	}
	if keys.DefaultTTL != 72*time.Hour || keys.DefaultMaxJSONBytes != 1<<20 || keys.MaxKeyBytes != 200 {
		t.Error("constants changed")
	}
}

// specErrors are the error cases with the message after the place; TestParseSpecErrors checks them with the
// "dedupe: " prefix and TestLoadSourcesSpecErrors with "sources.<id>.dedupe" places.
var specErrors = []struct {
	doc   string // YAML or JSON
	place string // below dedupe: "" or e.g. "json"
	msg   string // exact, or a prefix when it ends in "..."
}{
	{"strip", "", `unknown preset "strip" ` + validPresets},
	{"GitHub", "", `unknown preset "GitHub" ` + validPresets},
	{`""`, "", `empty preset name ` + validPresets},
	{"{preset: strip}", "preset", `unknown preset "strip" ` + validPresets},
	{"{preset: ''}", "preset", `empty preset name ` + validPresets},
	{"{preset: 5}", "preset", `must be a string, got 5`},
	{"{}", "", "one of preset, header, json or payload is required"},
	{"{ttl: 48h}", "", "one of preset, header, json or payload is required"},
	{"{header: a, json: b}", "", "only one of preset, header, json or payload may be set, got header and json"},
	{"{preset: stripe, json: id}", "", "only one of preset, header, json or payload may be set, got preset and json"},
	{`{"payload":{},"header":"x","json":"y","preset":"github"}`, "", "only one of preset, header, json or payload may be set, got payload and header and json and preset"},
	{"{header: ''}", "header", "must not be empty"},
	{"{header: }", "header", "must not be empty"},
	{"{header: 'X Id'}", "header", `"X Id" is not a valid header name (letters, digits and !#$%&'*+-.^_` + "`" + `|~ only)`},
	{"{header: 'X-Id:'}", "header", `"X-Id:" is not a valid header name (...`},
	{"{header: [a]}", "header", "must be a string, got a list"},
	{"{header: true}", "header", "must be a string, got boolean true"},
	{"{json: ''}", "json", "must not be empty"},
	{"{json: data..id}", "json", `segment 2 is empty in "data..id"`},
	{"{json: 'data.'}", "json", `segment 2 is empty in "data."`},
	{"{json: 'a.b..'}", "json", `segment 3 is empty in "a.b.."`},
	{"{json: '.a[0]'}", "json", `path ".a[0]": step 2 is an array index [0]; a json key path may only name object members`},
	{"{json: '.[3]'}", "json", `path ".[3]": step 1 is an array index [3]; a json key path may only name object members`},
	{"{json: .}", "json", `path "." selects the whole body; name a member, such as .id`},
	{"{json: '.a[x'}", "json", `path ".a[x"...`},
	{"{json: {a: b}}", "json", "must be a string, got an object"},
	{"{payload: {only: [.a], except: [.b]}}", "payload", "only and except are mutually exclusive: set one"},
	{"{payload: {only: []}}", "payload.only", "must list at least one path (leave it out to digest the whole body)"},
	{"{payload: {except: .a}}", "payload.except", `must be a list of paths such as [.user.id], got ".a"`},
	{"{payload: {except: [.ok, '.a[x]']}}", "payload.except[1]", `path ".a[x]"...`},
	{"{payload: {only: [5]}}", "payload.only[0]", `must be a path string such as .user.id, got 5`},
	{"{payload: {exclude: [.a]}}", "payload", `unknown field "exclude" (valid: only, except)`},
	{"{payload: true}", "payload", "must be an object with optional only or except path lists, got boolean true"},
	{"{payload: [.a]}", "payload", "must be an object with optional only or except path lists, got a list"},
	{"{json: id, ttl: 500ms}", "ttl", "must be at least 1s, got 500ms"},
	{"{json: id, ttl: 0s}", "ttl", "must be at least 1s, got 0s"},
	{"{json: id, ttl: -1h}", "ttl", "must be at least 1s, got -1h"},
	{"{json: id, ttl: 1.5s}", "ttl", "must be whole seconds, got 1.5s"},
	{"{json: id, ttl: 1m500ms}", "ttl", "must be whole seconds, got 1m500ms"},
	{"{json: id, ttl: 3d}", "ttl", `invalid duration "3d": a Go duration such as "48h", "1h30m" or "90s"`},
	{"{json: id, ttl: ''}", "ttl", `invalid duration "": a Go duration such as "48h", "1h30m" or "90s"`},
	{"{json: id, ttl: 99999999h}", "ttl", `invalid duration "99999999h": a Go duration such as "48h", "1h30m" or "90s"`},
	{"{json: id, ttl: 60}", "ttl", `must be a duration such as "48h" or "90s", got 60 (use ttl_seconds for a number of seconds)`},
	{"{json: id, ttl: }", "ttl", `must be a duration such as "48h" or "90s", got null (use ttl_seconds for a number of seconds)`},
	{"{json: id, ttl_seconds: 0}", "ttl_seconds", "must be a positive integer, got 0"},
	{"{json: id, ttl_seconds: -5}", "ttl_seconds", "must be a positive integer, got -5"},
	{"{json: id, ttl_seconds: 1.5}", "ttl_seconds", "must be a positive integer, got 1.5"},
	{`{"json":"id","ttl_seconds":1e3}`, "ttl_seconds", "must be a positive integer, got 1e3"},
	{`{"json":"id","ttl_seconds":"60"}`, "ttl_seconds", `must be a positive integer, got "60"`},
	{"{json: id, ttl_seconds: 9223372037}", "ttl_seconds", "is too large, got 9223372037 (at most 9223372036)"},
	{"{json: id, ttl_seconds: 99999999999999999999}", "ttl_seconds", "must be a positive integer, got 99999999999999999999"},
	{"{json: id, ttl: 1h, ttl_seconds: 60}", "", "ttl and ttl_seconds are mutually exclusive: set one"},
	{"{json: id, jsonpath: a}", "", `unknown field "jsonpath" (valid: preset, header, json, payload, ttl, ttl_seconds)`},
	{"{json: id, TTL: 1h}", "", `unknown field "TTL" (valid: preset, header, json, payload, ttl, ttl_seconds)`},
	{"{json: id, json: id2}", "", `field "json" is given twice`},
	{`{"json":"id","json":"id2"}`, "", `field "json" is given twice`},
	{"{<<: {json: id}}", "", "YAML merge keys (<<) are not supported"},
	{"[github]", "", "must be a preset name or an object, got a list"},
	{"5", "", "must be a preset name or an object, got 5"},
	{"true", "", "must be a preset name or an object, got boolean true"},
}

func checkErr(t *testing.T, what string, err error, want string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: no error, want %q", what, want)
		return
	}
	if p, ok := strings.CutSuffix(want, "..."); ok {
		if !strings.HasPrefix(err.Error(), p) {
			t.Errorf("%s:\n got  %q\n want %q...", what, err, p)
		}
	} else if err.Error() != want {
		t.Errorf("%s:\n got  %q\n want %q", what, err, want)
	}
}

func TestParseSpecErrors(t *testing.T) {
	for _, c := range specErrors {
		want := "dedupe: " + c.msg
		if c.place != "" {
			want = "dedupe: " + c.place + ": " + c.msg
		}
		s, err := keys.ParseSpec([]byte(c.doc))
		checkErr(t, "ParseSpec("+c.doc+")", err, want)
		if s.Enabled() {
			t.Errorf("ParseSpec(%s) returned an enabled spec with an error", c.doc)
		}
	}
	// Errors that only exist for a whole document.
	for doc, want := range map[string]string{
		"":                         "dedupe: empty spec: give a preset name (github, salesforce, shopify, standard_webhooks, stripe, svix) or an object with one of preset, header, json or payload",
		"# only a comment\n":       "dedupe: empty spec: ...",
		"null":                     "dedupe: is empty: give a preset name ...",
		"~":                        "dedupe: is empty: give a preset name ...",
		"{json: [}":                "dedupe: yaml: ...",
		"github\n---\nstripe\n":    "dedupe: more than one YAML document (---); give exactly one",
		"{json: id}\n---\n{}\n":    "dedupe: more than one YAML document (---); give exactly one",
		"\"\\ud800\"":              "dedupe: unknown preset ...",
		"{\"json\": \"id\"} extra": "dedupe: yaml: ...",
	} {
		_, err := keys.ParseSpec([]byte(doc))
		checkErr(t, "ParseSpec("+doc+")", err, want)
	}
}
