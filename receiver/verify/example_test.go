package verify_test

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/dedupeworker/dedupeworker/receiver/verify"
)

// GitHub's documented test vector, then the same delivery with its body changed.
func ExampleNew() {
	v, err := verify.New(verify.Config{
		Scheme:  verify.SchemeGitHub,
		Secrets: []string{"It's a Secret to Everybody"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	h := http.Header{}
	h.Set("X-Hub-Signature-256", "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17")

	fmt.Println(v.Verify(h, []byte("Hello, World!")))
	err = v.Verify(h, []byte("Hello, World?"))
	fmt.Println(err)
	fmt.Println(errors.Is(err, verify.ErrMismatch), verify.Reason(err))
	fmt.Println(v)

	_, err = verify.New(verify.Config{Scheme: verify.SchemeGitHub, Secrets: []string{"old", ""}})
	fmt.Println(err)
	// Output:
	// <nil>
	// verify: github: X-Hub-Signature-256: signature mismatch: matches none of 1 secret
	// true mismatch
	// github X-Hub-Signature-256 (1 secret)
	// verify: secrets[1]: empty
}

// Stripe's SDK test vector, checked against a clock set to 100 s after the signed time, then 10 minutes later.
func ExampleNew_stripe() {
	body := []byte(stripeEvent) // the stripe-dotnet fixture (vectors_test.go)
	h := http.Header{}
	h.Set("Stripe-Signature", "t=1533204620,v1=2220f87ef101a04665f11cdf770523143f875572008577fa0f20882ddb9cc3c7")

	for _, now := range []int64{1533204620 + 100, 1533204620 + 700} {
		v, err := verify.New(verify.Config{
			Scheme:  verify.SchemeStripe,
			Secrets: []string{"webhook_secret"},
			Now:     func() time.Time { return time.Unix(now, 0) },
		})
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(v.Verify(h, body))
	}
	// Output:
	// <nil>
	// verify: stripe: Stripe-Signature: timestamp outside tolerance: signed at 1533204620, 11m40s before now (tolerance 5m0s)
}

// A secret rotation with Svix: the old secret (the Standard Webhooks test vector's) and a new one are both listed,
// so deliveries signed with either verify until the old one is removed.
func ExampleNew_rotation() {
	v, err := verify.New(verify.Config{
		Scheme: verify.SchemeSvix,
		Secrets: []string{
			"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",         // old
			"whsec_bmV3LXNpZ25pbmcta2V5LWFmdGVyLXJvdGF0aW9u", // new
		},
		Now: func() time.Time { return time.Unix(1614265330, 0) },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	h := http.Header{}
	h.Set("svix-id", "msg_p5jXN8AQM9LWM0D4loKWxJek")
	h.Set("svix-timestamp", "1614265330")
	h.Set("svix-signature", "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
	fmt.Println(v.Verify(h, []byte(`{"test": 2432232314}`)))

	h.Del("svix-signature")
	fmt.Println(v.Verify(h, []byte(`{"test": 2432232314}`)))
	// Output:
	// <nil>
	// verify: svix: Svix-Signature: header missing: and no complete webhook-* set either
}

// A provider without a scheme of its own: SHA-512, base64, behind a "v1=" prefix.
func ExampleNew_hmac() {
	v, err := verify.New(verify.Config{
		Scheme:    verify.SchemeHMAC,
		Secrets:   []string{"generic-secret"},
		Header:    "X-Webhook-Signature",
		Algorithm: "sha512",
		Encoding:  "base64",
		Prefix:    "v1=",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(v)
	h := http.Header{}
	h.Set("X-Webhook-Signature", "v1=not base64")
	fmt.Println(v.Verify(h, []byte("{}")))

	_, err = verify.New(verify.Config{Scheme: verify.SchemeHMAC, Secrets: []string{"s"}, Header: "X-Sig", Algorithm: "md5"})
	fmt.Println(err)
	// Output:
	// hmac X-Webhook-Signature sha512 "v1=" and base64 of 64 bytes (1 secret)
	// verify: hmac: X-Webhook-Signature: header malformed: want "v1=" and base64 of 64 bytes
	// verify: algorithm: not a known algorithm (want one of sha1, sha256, sha512; got "md5")
}

func ExampleSchemes() {
	fmt.Println(verify.Schemes())
	// Output:
	// [github hmac none shopify standard_webhooks stripe svix]
}
