package receiver_test

import (
	"errors"
	"testing"

	"github.com/dedupeworker/dedupeworker/receiver"
)

// NewPolicy's errors about a declared source are *SourceError with the line of its verify block, or of the source
// when it has none, so that ingest names the file and line as the worker does. Before, a source without a verify
// block and a scheme without a secret were plain errors and ingest printed them without either.
func TestNewPolicySourceErrorLines(t *testing.T) {
	doc := "sources:\n  gh:\n    dedupe: github\n    verify: github\n  orders:\n    dedupe: {json: id}\n  open:\n\n    verify: none\n"
	for _, c := range []struct {
		name    string
		environ []string
		want    []receiver.SourceError
	}{
		{"no secrets", nil, []receiver.SourceError{
			{"sources.gh.verify", 4, "scheme github needs a secret: set DEDUPE_INGEST_SECRET_GH, or put a file gh (every tenant) or <tenant>.gh in the secrets directory"},
			{"sources.orders", 5, "no verify block: declare how its deliveries are verified, verify: <scheme> (github, hmac, shopify, standard_webhooks, stripe, svix) or verify: none to accept unsigned deliveries"},
		}},
		{"a secret for verify none", []string{"DEDUPE_INGEST_SECRET_GH=" + ghOld, "DEDUPE_INGEST_SECRET_OPEN=" + ghNew}, []receiver.SourceError{
			{"sources.open.verify", 9, "scheme none takes no secrets, but DEDUPE_INGEST_SECRET_OPEN gives some: remove them or choose a scheme"},
			{"sources.orders", 5, "no verify block: declare how its deliveries are verified, verify: <scheme> (github, hmac, shopify, standard_webhooks, stripe, svix) or verify: none to accept unsigned deliveries"},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := mustSources(t, doc)
			secrets, err := receiver.LoadSecrets(receiver.SecretsConfig{Environ: c.environ, Sources: src.IDs()})
			if err != nil {
				t.Fatal(err)
			}
			_, err = receiver.NewPolicy(receiver.PolicyConfig{Sources: src, Secrets: secrets})
			if err == nil {
				t.Fatal("NewPolicy accepted it")
			}
			errs := err.(interface{ Unwrap() []error }).Unwrap()
			if len(errs) != len(c.want) {
				t.Fatalf("NewPolicy: %v\nwant %v", err, c.want)
			}
			for i, e := range errs {
				var se *receiver.SourceError
				if !errors.As(e, &se) {
					t.Fatalf("%T %v is no *SourceError", e, e)
				}
				if *se != c.want[i] {
					t.Errorf("error %d: %+v\nwant    %+v", i, *se, c.want[i])
				}
			}
		})
	}
}
