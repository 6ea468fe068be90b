package receiver_test

import (
	"net/http"
	"testing"

	"github.com/dedupeworker/dedupeworker/keys"
	"github.com/dedupeworker/dedupeworker/receiver"
	"github.com/dedupeworker/dedupeworker/receiver/verify"
)

// The binding decision, pair by pair: which key header is bound, what it gets, and which requests are refused.
func TestKeyBindingDecide(t *testing.T) {
	signed := func(id, header string) verify.Delivery { return verify.Delivery{ID: id, Header: header, Signed: true} }
	documented := func(id, header string) verify.Delivery { return verify.Delivery{ID: id, Header: header} }
	for _, c := range []struct {
		name, scheme, spec string
		h                  http.Header
		d                  verify.Delivery
		header, value      string // "" header: not bound
		refused            bool
	}{
		{"svix preset, webhook-* form", "svix", "svix", hdr("Webhook-Id", "m1"), signed("m1", "Webhook-Id"), "Svix-Id", "m1", false},
		{"svix preset, svix-* form", "svix", "svix", hdr("Svix-Id", "m1"), signed("m1", "Svix-Id"), "Svix-Id", "m1", false},
		{"svix, both names agree", "svix", "svix", hdr("Svix-Id", "m1", "Webhook-Id", "m1"), signed("m1", "Svix-Id"), "Svix-Id", "m1", false},
		{"svix, chosen svix-id", "svix", "svix", hdr("Webhook-Id", "m1", "Svix-Id", "x"), signed("m1", "Webhook-Id"), "Svix-Id", "", true},
		{"svix, chosen svix_id", "svix", "svix", http.Header{"Webhook-Id": {"m1"}, "svix_id": {"x"}}, signed("m1", "Webhook-Id"), "Svix-Id", "", true},
		{"svix, an empty svix-id", "svix", "svix", hdr("Webhook-Id", "m1", "Svix-Id", ""), signed("m1", "Webhook-Id"), "Svix-Id", "m1", false},
		{"svix, blanks around the id", "svix", "svix", http.Header{"Webhook-Id": {" m1 "}, "Svix-Id": {"m1\t"}}, signed("m1", "Webhook-Id"), "Svix-Id", "m1", false},
		{"svix keyed by webhook-id", "svix", "standard_webhooks", hdr("Svix-Id", "m1"), signed("m1", "Svix-Id"), "Webhook-Id", "m1", false},
		{"standard webhooks keyed by svix-id", "standard_webhooks", "svix", hdr("Webhook-Id", "m1"), signed("m1", "Webhook-Id"), "Svix-Id", "m1", false},
		{"standard webhooks, second value", "standard_webhooks", "standard_webhooks", http.Header{"Webhook-Id": {"m1", "m2"}}, signed("m1", "Webhook-Id"), "Webhook-Id", "", true},
		{"shopify events form", "shopify", "shopify", hdr("Shopify-Webhook-Id", "w1"), documented("w1", "Shopify-Webhook-Id"), "X-Shopify-Webhook-Id", "w1", false},
		{"shopify, two ids", "shopify", "shopify", hdr("Shopify-Webhook-Id", "w1", "X-Shopify-Webhook-Id", "w2"), documented("w1", "Shopify-Webhook-Id"), "X-Shopify-Webhook-Id", "", true},
		{"shopify keyed by its event id: not bound", "shopify", "{header: X-Shopify-Event-Id}", hdr("X-Shopify-Webhook-Id", "w1", "X-Shopify-Event-Id", "e1"), documented("w1", "X-Shopify-Webhook-Id"), "", "", false},
		{"github", "github", "github", hdr("X-GitHub-Delivery", "d1"), documented("d1", "X-Github-Delivery"), "X-Github-Delivery", "d1", false},
		{"github without a delivery id", "github", "github", hdr(), verify.Delivery{}, "X-Github-Delivery", "", false},
		{"github, an id where none was read", "github", "github", http.Header{"x-github-delivery": {"d9"}}, verify.Delivery{}, "X-Github-Delivery", "", true},
		{"stripe keyed by its body: nothing to bind", "stripe", "stripe", hdr("X-Event-Id", "e"), verify.Delivery{}, "", "", false},
		{"hmac keyed by a header: nothing the scheme names", "hmac", "{header: X-Id}", hdr("X-Id", "1"), verify.Delivery{}, "", "", false},
		{"none", "none", "{header: X-Id}", hdr("X-Id", "1"), verify.Delivery{}, "", "", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			spec, err := keys.ParseSpec([]byte(c.spec))
			if err != nil {
				t.Fatal(err)
			}
			header, value, set, err := receiver.DecideKey(c.scheme, spec, c.h, c.d)
			if header != c.header || value != c.value || set != (c.value != "") || (err != nil) != c.refused {
				t.Fatalf("bound %q = %q (set %v), refused %v; want %q = %q, refused %v", header, value, set, err, c.header, c.value, c.refused)
			}
		})
	}
}
