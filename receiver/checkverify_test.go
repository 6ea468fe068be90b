package receiver_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/dedupeworker/dedupeworker/keys"
	"github.com/dedupeworker/dedupeworker/receiver"
)

// CheckVerify finds, from the sources file alone, every verify-block fault NewPolicy stops on, with the same
// message and whatever the secrets: it is what `sources check` runs before a rollout. Before it, a misspelt scheme
// or algorithm passed the check and NewPolicy reported only the missing secret of such a source.
func TestCheckVerify(t *testing.T) {
	for _, c := range []struct {
		name, doc string
		want      []receiver.SourceError // nil: valid
	}{
		{"every scheme valid", "sources:\n  gh: {verify: github}\n  st: {verify: {scheme: stripe, tolerance: 1m}}\n  sig: {verify: {scheme: hmac, header: X-Sig, algorithm: sha1}}\n  open: {verify: none}\n", nil},
		{"no verify block at all (the worker's file)", "sources: {orders: {dedupe: {json: id}}}", nil},
		{"misspelt scheme", "sources:\n  gh: {dedupe: github, verify: githb}\n",
			[]receiver.SourceError{{"sources.gh.verify.scheme", 2, "not a known scheme (want one of github, hmac, none, shopify, standard_webhooks, stripe, svix; got \"githb\")"}}},
		{"md5", "sources:\n  orders:\n    dedupe: {json: id}\n    verify:\n      scheme: hmac\n      header: X-Sig\n      algorithm: md5\n",
			[]receiver.SourceError{{"sources.orders.verify.algorithm", 4, "not a known algorithm (want one of sha1, sha256, sha512; got \"md5\")"}}},
		{"two sources at fault, in id order", "sources:\n  z: {verify: {scheme: github, tolerance: 1m}}\n  a: {verify: hmac}\n  ok: {verify: none}\n",
			[]receiver.SourceError{{"sources.a.verify.header", 3, "required for scheme hmac"}, {"sources.z.verify.tolerance", 2, "scheme github signs no timestamp"}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			src := mustSources(t, c.doc)
			err := receiver.CheckVerify(src)
			var got []receiver.SourceError
			if err != nil {
				for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
					var se *receiver.SourceError
					if !errors.As(e, &se) {
						t.Fatalf("%T %v is no *SourceError", e, e)
					}
					got = append(got, *se)
				}
			}
			if len(got) != len(c.want) {
				t.Fatalf("CheckVerify: %v, want %v", err, c.want)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Errorf("error %d: %+v, want %+v", i, got[i], c.want[i])
				}
			}
			if c.want == nil {
				return
			}
			// NewPolicy stops on the same faults, with and without secrets for the sources.
			var environ []string
			for _, id := range src.IDs() {
				if src.Verify[id].Scheme != "none" {
					environ = append(environ, receiver.SecretEnv(id)+"="+ghOld)
				}
			}
			for _, env := range [][]string{nil, environ} {
				secrets, err := receiver.LoadSecrets(receiver.SecretsConfig{Environ: env, Sources: src.IDs()})
				if err != nil {
					t.Fatal(err)
				}
				_, perr := receiver.NewPolicy(receiver.PolicyConfig{Sources: src, Secrets: secrets})
				if perr == nil {
					t.Fatal("NewPolicy accepted it")
				}
				for _, w := range c.want {
					if !strings.Contains(perr.Error(), w.Error()) {
						t.Errorf("secrets %v: NewPolicy: %v\nlacks %v", env, perr, w.Error())
					}
				}
			}
		})
	}
}

// SchemeOf is what ingest verifies each source with: the block's scheme; with no document, the preset's own.
func TestSchemeOf(t *testing.T) {
	src := mustSources(t, "sources: {gh: {verify: github}, legacy: {}}")
	for _, c := range []struct {
		src         keys.Sources
		id          string
		fromPresets bool
		want        string
	}{
		{src, "gh", false, "github"},
		{src, "legacy", false, ""},
		{keys.PresetSources(), "stripe", true, "stripe"},
		{keys.PresetSources(), "salesforce", true, ""},
	} {
		if got := receiver.SchemeOf(c.src, c.id, c.fromPresets); got != c.want {
			t.Errorf("SchemeOf(%s, presets %v) = %q, want %q", c.id, c.fromPresets, got, c.want)
		}
	}
}
