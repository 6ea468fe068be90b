package verify_test

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/receiver/verify"
)

// stripeEvent is the body of Stripe's .NET SDK test fixture src/StripeTests/Resources/event_test_signature.json
// (github.com/stripe/stripe-dotnet, used by src/StripeTests/Services/Events/EventUtilityTest.cs), byte for byte,
// with its final newline.
const stripeEvent = `{
  "id": "evt_123",
  "object": "event",
  "account": "acct_123",
  "api_version": "2017-05-25",
  "created": 1533204620,
  "data": {
    "object": {
      "id": "cus_123",
      "object": "customer",
      "created": 123456789,
      "email": "test@stripe.com",
      "livemode": false,
      "metadata": {}
    }
  },
  "livemode": false,
  "pending_webhooks": 1,
  "request": {
    "id": "req_123",
    "idempotency_key": "idempotency-key-123"
  },
  "type": "customer.created"
}
`

// Each vector is a delivery a provider (or its own SDK's tests) published, with the secret that signed it.
var vectors = []struct {
	name, source string
	cfg          verify.Config
	h            http.Header
	body         string
}{
	{
		name: "github",
		// GitHub Docs, "Validating webhook deliveries", section "Testing the webhook payload validation".
		source: "docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries",
		cfg:    verify.Config{Scheme: verify.SchemeGitHub, Secrets: []string{"It's a Secret to Everybody"}},
		h:      hdr("X-Hub-Signature-256", "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"),
		body:   "Hello, World!",
	},
	{
		name: "stripe",
		// stripe-dotnet src/StripeTests/Services/Events/EventUtilityTest.cs: secret "webhook_secret", t=1533204620,
		// verified there with the current time set to t+100 and a tolerance of 300 s. The v0 element is ignored.
		source: "github.com/stripe/stripe-dotnet EventUtilityTest",
		cfg: verify.Config{Scheme: verify.SchemeStripe, Secrets: []string{"webhook_secret"},
			Now: fixedClock(time.Unix(1533204620+100, 0))},
		h: hdr("Stripe-Signature", "t=1533204620,"+
			"v1=2220f87ef101a04665f11cdf770523143f875572008577fa0f20882ddb9cc3c7,"+
			"v0=63f3a72374a733066c4be69ed7f8e5ac85c22c9f0a6a612ab9a025a9e4ee7eef"),
		body: stripeEvent,
	},
	{
		name: "standard_webhooks",
		// github.com/standard-webhooks/standard-webhooks libraries/go/webhook_test.go, TestWebhookSign (the same
		// vector is in the spec's other libraries' tests).
		source: "github.com/standard-webhooks/standard-webhooks libraries/go/webhook_test.go",
		cfg: verify.Config{Scheme: verify.SchemeStandardWebhooks, Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"},
			Now: fixedClock(time.Unix(1614265330, 0))},
		h: hdr("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek", "webhook-timestamp", "1614265330",
			"webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="),
		body: `{"test": 2432232314}`,
	},
	{
		name: "standard_webhooks secret without whsec_",
		// The same test file, TestWebhookPrefix: the prefix is optional.
		source: "github.com/standard-webhooks/standard-webhooks libraries/go/webhook_test.go",
		cfg: verify.Config{Scheme: verify.SchemeStandardWebhooks, Secrets: []string{"MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"},
			Now: fixedClock(time.Unix(1614265330, 0))},
		h: hdr("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek", "webhook-timestamp", "1614265330",
			"webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="),
		body: `{"test": 2432232314}`,
	},
	{
		name: "svix",
		// github.com/svix/svix-webhooks go/webhook_test.go, TestWebhookSign: the same vector, sent by Svix under
		// its svix-* names.
		source: "github.com/svix/svix-webhooks go/webhook_test.go",
		cfg: verify.Config{Scheme: verify.SchemeSvix, Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"},
			Now: fixedClock(time.Unix(1614265330, 0))},
		h: hdr("svix-id", "msg_p5jXN8AQM9LWM0D4loKWxJek", "svix-timestamp", "1614265330",
			"svix-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="),
		body: `{"test": 2432232314}`,
	},
	{
		name: "svix unbranded",
		// The same test file, "valid unbranded signature is valid": Svix also sends the webhook-* names.
		source: "github.com/svix/svix-webhooks go/webhook_test.go",
		cfg: verify.Config{Scheme: verify.SchemeSvix, Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"},
			Now: fixedClock(time.Unix(1614265330, 0))},
		h: hdr("webhook-id", "msg_p5jXN8AQM9LWM0D4loKWxJek", "webhook-timestamp", "1614265330",
			"webhook-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="),
		body: `{"test": 2432232314}`,
	},
	{
		name: "shopify",
		// Shopify's shopify_app gem, test/shopify_app/controller_concerns/webhook_verification_test.rb,
		// "authorized requests should be successful": secret "secret", the form body foo=anything. Shopify's docs
		// give the computation (Base64.strict_encode64(OpenSSL::HMAC.digest('sha256', secret, body))), not a value.
		source: "github.com/Shopify/shopify_app webhook_verification_test.rb",
		cfg:    verify.Config{Scheme: verify.SchemeShopify, Secrets: []string{"secret"}},
		h:      hdr("X-Shopify-Hmac-Sha256", "yCGX/RrK4fcuNtr3ztk5tQGsOBjcAzHpGLdMUrbV8yI="),
		body:   "foo=anything",
	},
	{
		name: "shopify old secret",
		// The same file, "authorized request validated with old secret should be successful": a rotation, both
		// secrets configured, the request signed with the old one.
		source: "github.com/Shopify/shopify_app webhook_verification_test.rb",
		cfg:    verify.Config{Scheme: verify.SchemeShopify, Secrets: []string{"secret", "old_secret"}},
		h:      hdr("X-Shopify-Hmac-Sha256", "XqRcjrSv57VACn6apEO9znyu/wkN1VC7QxdSPwK3Hzs="),
		body:   "foo=anything",
	},
	{
		name: "shopify new header",
		// The same file, "authorized request with new header format should be successful".
		source: "github.com/Shopify/shopify_app webhook_verification_test.rb",
		cfg:    verify.Config{Scheme: verify.SchemeShopify, Secrets: []string{"secret"}},
		h:      hdr("Shopify-Hmac-Sha256", "yCGX/RrK4fcuNtr3ztk5tQGsOBjcAzHpGLdMUrbV8yI="),
		body:   "foo=anything",
	},
	{
		name: "shopify new header wins",
		// The same file, "new header format takes precedence when both headers present".
		source: "github.com/Shopify/shopify_app webhook_verification_test.rb",
		cfg:    verify.Config{Scheme: verify.SchemeShopify, Secrets: []string{"secret"}},
		h: hdr("Shopify-Hmac-Sha256", "yCGX/RrK4fcuNtr3ztk5tQGsOBjcAzHpGLdMUrbV8yI=",
			"X-Shopify-Hmac-Sha256", "invalid_hmac"),
		body: "foo=anything",
	},
	{
		name: "hmac as github",
		// The GitHub vector again through the generic scheme, configured as GitHub signs.
		source: "docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries",
		cfg: verify.Config{Scheme: verify.SchemeHMAC, Secrets: []string{"It's a Secret to Everybody"},
			Header: "X-Hub-Signature-256", Algorithm: "sha256", Encoding: "hex", Prefix: "sha256="},
		h:    hdr("X-Hub-Signature-256", "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"),
		body: "Hello, World!",
	},
	{
		name:   "hmac as shopify",
		source: "github.com/Shopify/shopify_app webhook_verification_test.rb",
		cfg: verify.Config{Scheme: verify.SchemeHMAC, Secrets: []string{"secret"},
			Header: "X-Shopify-Hmac-Sha256", Encoding: "base64"},
		h:    hdr("X-Shopify-Hmac-Sha256", "yCGX/RrK4fcuNtr3ztk5tQGsOBjcAzHpGLdMUrbV8yI="),
		body: "foo=anything",
	},
}

func TestPublishedVectors(t *testing.T) {
	for _, c := range vectors {
		t.Run(c.name, func(t *testing.T) {
			v := mustNew(t, c.cfg)
			if err := v.Verify(c.h, []byte(c.body)); err != nil {
				t.Fatalf("the vector from %s does not verify: %v", c.source, err)
			}
			// One byte more or less in the body must break it.
			for _, body := range []string{c.body + " ", c.body[:len(c.body)-1]} {
				if err := v.Verify(c.h, []byte(body)); !errors.Is(err, verify.ErrMismatch) {
					t.Fatalf("tampered body: %v, want ErrMismatch", err)
				}
			}
		})
	}
}

// TestTestSignersMatchVectors pins the tests' own signers (helpers_test.go) to the published values, so that the
// table tests that sign with them test against the providers' algorithms, not against the package's.
func TestTestSignersMatchVectors(t *testing.T) {
	for _, c := range []struct{ name, got, want string }{
		{"github", githubSig("It's a Secret to Everybody", []byte("Hello, World!")),
			"sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"},
		{"stripe", stripeV1("webhook_secret", 1533204620, []byte(stripeEvent)),
			"2220f87ef101a04665f11cdf770523143f875572008577fa0f20882ddb9cc3c7"},
		{"standard", standardSig("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330,
			[]byte(`{"test": 2432232314}`)), "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="},
		{"shopify", shopifySig("secret", []byte("foo=anything")), "yCGX/RrK4fcuNtr3ztk5tQGsOBjcAzHpGLdMUrbV8yI="},
		{"shopify old", shopifySig("old_secret", []byte("foo=anything")), "XqRcjrSv57VACn6apEO9znyu/wkN1VC7QxdSPwK3Hzs="},
	} {
		if c.got != c.want {
			t.Errorf("%s: test signer gives %s, the published vector is %s", c.name, c.got, c.want)
		}
	}
}

func TestStripeVectorOutsideTolerance(t *testing.T) {
	// stripe-dotnet's EventUtilityTest also checks that the same signature is refused once the tolerance is over.
	h := vectors[1].h
	for _, c := range []struct {
		name string
		now  int64
		tol  time.Duration
		want error
	}{
		{"t+300, default tolerance", 1533204620 + 300, 0, nil},
		{"t+301, default tolerance", 1533204620 + 301, 0, verify.ErrTimestamp},
		{"t-300 (clock behind)", 1533204620 - 300, 0, nil},
		{"t-301 (clock behind)", 1533204620 - 301, 0, verify.ErrTimestamp},
		{"t+100, tolerance 99s", 1533204620 + 100, 99 * time.Second, verify.ErrTimestamp},
		{"t+100, tolerance 100s", 1533204620 + 100, 100 * time.Second, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			v := mustNew(t, verify.Config{Scheme: verify.SchemeStripe, Secrets: []string{"webhook_secret"},
				Tolerance: c.tol, Now: fixedClock(time.Unix(c.now, 0))})
			checkErr(t, v.Verify(h, []byte(stripeEvent)), c.want, "stripe", []string{"webhook_secret"},
				[]string{"2220f87ef101a04665f11cdf770523143f875572008577fa0f20882ddb9cc3c7"})
		})
	}
}
