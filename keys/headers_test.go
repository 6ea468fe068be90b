package keys_test

import (
	"testing"

	"github.com/dedupeworker/dedupeworker/keys"
)

func TestHeaderList(t *testing.T) {
	l := keys.HeaderList{{"Content-Type", "a"}, {"x-id", "first"}, {"X-Id", "second"}, {"X-Empty", ""}}
	for _, c := range []struct {
		name, value string
		ok          bool
	}{
		{"X-ID", "first", true},
		{"x-id", "first", true},
		{"content-type", "a", true},
		{"x-empty", "", true},
		{"X-Missing", "", false},
		{"", "", false},
	} {
		v, ok := l.Get(c.name)
		if v != c.value || ok != c.ok {
			t.Errorf("HeaderList.Get(%q) = %q, %v; want %q, %v", c.name, v, ok, c.value, c.ok)
		}
	}
	if v, ok := keys.HeaderList(nil).Get("x"); v != "" || ok {
		t.Errorf("nil HeaderList: %q, %v", v, ok)
	}
}

func TestNATSHeaders(t *testing.T) {
	h := keys.NATSHeaders{
		"Svix-Id":      {"upper", "upper2"},
		"svix-id":      {"lower"},
		"SVIX-ID":      {"all-caps"},
		"Content-Type": {"application/json"},
		"X-Empty":      {},
		"x-empty":      {"later"},
		"X-Blank":      {""},
	}
	for _, c := range []struct {
		name, value string
		ok          bool
	}{
		{"svix-id", "lower", true},    // exact name first
		{"Svix-Id", "upper", true},    // exact name first, first value
		{"SVIX-ID", "all-caps", true}, // exact
		{"sViX-iD", "all-caps", true}, // no exact name: the lexically smallest of SVIX-ID, Svix-Id, svix-id
		{"content-type", "application/json", true},
		{"X-EMPTY", "later", true}, // names without values are skipped
		{"X-Empty", "later", true}, // even the exact one
		{"x-blank", "", true},      // an empty value is a value (the Extractor treats it as no key)
		{"X-Missing", "", false},
	} {
		for i := 0; i < 20; i++ { // map order varies between iterations; the answer must not
			v, ok := h.Get(c.name)
			if v != c.value || ok != c.ok {
				t.Fatalf("NATSHeaders.Get(%q) = %q, %v; want %q, %v", c.name, v, ok, c.value, c.ok)
			}
		}
	}
	if a := testing.AllocsPerRun(100, func() { h.Get("sViX-iD"); h.Get("svix-id"); h.Get("nope") }); a != 0 {
		t.Errorf("NATSHeaders.Get allocates: %v", a)
	}
	if v, ok := keys.NATSHeaders(nil).Get("x"); v != "" || ok {
		t.Errorf("nil NATSHeaders: %q, %v", v, ok)
	}
	// Through the Extractor: empty first value is no key.
	key, reason := keys.Extractor{}.Extract(mustSpec(t, "{header: X-Blank}"), h, nil)
	if key != "" || reason != keys.ReasonMissing {
		t.Errorf("empty NATS header value: %q, %q", key, reason)
	}
	key, reason = keys.Extractor{}.Extract(mustSpec(t, "svix"), h, nil)
	if key != "lower" || reason != "" {
		t.Errorf("svix preset over NATS headers: %q, %q", key, reason)
	}
}
