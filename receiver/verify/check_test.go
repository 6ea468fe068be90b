package verify_test

import (
	"errors"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/receiver/verify"
)

// Check finds every fault of a Config that New finds outside its secrets, with the same *FieldError, and none
// about the secrets: a sources file is checked where they are not.
func TestCheck(t *testing.T) {
	const secret = "gh-9a8b7c6d"
	for _, c := range []struct {
		name  string
		cfg   verify.Config
		field string // "": valid
	}{
		{"github", verify.Config{Scheme: verify.SchemeGitHub}, ""},
		{"stripe with a tolerance", verify.Config{Scheme: verify.SchemeStripe, Tolerance: time.Minute}, ""},
		{"standard_webhooks", verify.Config{Scheme: verify.SchemeStandardWebhooks}, ""},
		{"svix", verify.Config{Scheme: verify.SchemeSvix}, ""},
		{"shopify", verify.Config{Scheme: verify.SchemeShopify}, ""},
		{"hmac with every option", verify.Config{Scheme: verify.SchemeHMAC, Header: "X-Sig", Algorithm: "sha512", Encoding: "base64url", Prefix: "v1="}, ""},
		{"none", verify.Config{Scheme: verify.SchemeNone}, ""},
		{"secrets are not looked at", verify.Config{Scheme: verify.SchemeStandardWebhooks, Secrets: []string{"not base64!", ""}}, ""},
		{"secrets on none are not looked at either", verify.Config{Scheme: verify.SchemeNone, Secrets: []string{secret}}, ""},

		{"no scheme", verify.Config{}, "scheme"},
		{"misspelt scheme", verify.Config{Scheme: "githb"}, "scheme"},
		{"hmac md5", verify.Config{Scheme: verify.SchemeHMAC, Header: "X-Sig", Algorithm: "md5"}, "algorithm"},
		{"hmac base32", verify.Config{Scheme: verify.SchemeHMAC, Header: "X-Sig", Encoding: "base32"}, "encoding"},
		{"hmac without header", verify.Config{Scheme: verify.SchemeHMAC}, "header"},
		{"hmac header with a blank", verify.Config{Scheme: verify.SchemeHMAC, Header: "X Sig"}, "header"},
		{"hmac prefix with a blank", verify.Config{Scheme: verify.SchemeHMAC, Header: "X-Sig", Prefix: " v1="}, "prefix"},
		{"algorithm on github", verify.Config{Scheme: verify.SchemeGitHub, Algorithm: "sha1"}, "algorithm"},
		{"tolerance on shopify", verify.Config{Scheme: verify.SchemeShopify, Tolerance: time.Minute}, "tolerance"},
		{"negative tolerance", verify.Config{Scheme: verify.SchemeStripe, Tolerance: -time.Second}, "tolerance"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := verify.Check(c.cfg)
			if c.field == "" {
				if err != nil {
					t.Fatalf("Check: %v", err)
				}
				return
			}
			var fe *verify.FieldError
			if !errors.As(err, &fe) || fe.Field != c.field {
				t.Fatalf("Check: %v, want a *FieldError for %q", err, c.field)
			}
			withSecret := c.cfg
			withSecret.Secrets = []string{"c2VjcmV0LW9mLXRoZS10ZXN0"}
			if _, nerr := verify.New(withSecret); nerr == nil || nerr.Error() != err.Error() {
				t.Fatalf("Check says %v, New with a valid secret %v", err, nerr)
			}
		})
	}
}
