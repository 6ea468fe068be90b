package integration

import (
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/dedupeworker/dedupeworker/keys"
)

// The ledger itself must catch every kind of loss and double delivery; these run without NATS (also in -short).
func TestLedgerCatches(t *testing.T) {
	exp := []Expect{
		{Seq: 1, Subject: "ingest.a.gh", Kind: Keyed, Key: "a:gh:k1", Body: 11},
		{Seq: 2, Subject: "ingest.a.gh", Kind: Keyed, Key: "a:gh:k1", Body: 12},
		{Seq: 3, Subject: "ingest.b.gh", Kind: Keyed, Key: "b:gh:k1", Body: 13},
		{Seq: 4, Subject: "ingest.a.misc", Kind: Unkeyed, Reason: "no-dedupe", Body: 14},
		{Seq: 5, Subject: "ingest.a", Kind: DeadLetter, Body: 15},
	}
	good := func() ([]Record, []Record) {
		return []Record{
				{Seq: 1, Subject: "deduped.a.gh", IdemKey: "a:gh:k1", Key: "k1", MsgID: "m1", Status: "unique", Body: 12},
				{Seq: 2, Subject: "deduped.b.gh", IdemKey: "b:gh:k1", Key: "k1", MsgID: "m2", Status: "unique", Body: 13},
				{Seq: 3, Subject: "deduped.a.misc", IdemKey: "msg/INGEST/4/1796000000000000000", MsgID: "msg/INGEST/4/1796000000000000000", Status: "unkeyed", Reason: "no-dedupe", Body: 14},
			}, []Record{
				{Seq: 1, Subject: "dedupe.dlq.bad-subject", Err: "bad subject", In: "ingest.a"},
			}
	}
	outs, dlq := good()
	if r := Balance(exp, outs, dlq); !r.OK() || r.Duplicate != 1 {
		t.Fatalf("a correct run does not balance:\n%s", r)
	}
	cases := []struct {
		name   string
		mutate func(outs, dlq []Record) ([]Record, []Record)
		want   string
	}{
		{"key twice", func(o, d []Record) ([]Record, []Record) { return append(o, o[0]), d }, "appears 2 times"},
		{"key lost", func(o, d []Record) ([]Record, []Record) { return o[1:], d }, `missing Idempotency-Key "a:gh:k1"`},
		{"unexpected key", func(o, d []Record) ([]Record, []Record) {
			x := o[0]
			x.IdemKey, x.Key = "a:gh:zz", "zz"
			return append(o, x), d
		}, "unexpected Idempotency-Key"},
		{"tenant crossed", func(o, d []Record) ([]Record, []Record) { o[1].Subject = "deduped.a.gh"; return o, d }, "is not <tenant>:<source>"},
		{"wrong body", func(o, d []Record) ([]Record, []Record) { o[0].Body = 99; return o, d }, "none of the bodies"},
		{"unkeyed lost", func(o, d []Record) ([]Record, []Record) { return o[:2], d }, "missing unkeyed output msg/INGEST/4"},
		{"unkeyed twice", func(o, d []Record) ([]Record, []Record) { return append(o, o[2]), d }, "appears 2 times"},
		{"wrong reason", func(o, d []Record) ([]Record, []Record) { o[2].Reason = "missing"; return o, d }, `Dedupe-Reason "missing", want "no-dedupe"`},
		{"dead letter lost", func(o, d []Record) ([]Record, []Record) { return o, nil }, "dead letters with Dedupe-Subject"},
		{"dead letter without error", func(o, d []Record) ([]Record, []Record) { d[0].Err = ""; return o, d }, "no Dedupe-Error"},
		{"no msg id", func(o, d []Record) ([]Record, []Record) { o[0].MsgID = ""; return o, d }, "no Nats-Msg-Id"},
		{"forged header", func(o, d []Record) ([]Record, []Record) { o[0].Forged = []string{"dedupe-key (1 values)"}; return o, d }, "did not set"},
		{"reason on unique", func(o, d []Record) ([]Record, []Record) { o[0].Reason = "forged"; return o, d }, "unique event with Dedupe-Reason"},
		{"duplicate status", func(o, d []Record) ([]Record, []Record) { o[0].Status = "duplicate"; return o, d }, "Dedupe-Status"},
	}
	for _, c := range cases {
		o, d := good()
		o, d = c.mutate(o, d)
		r := Balance(exp, o, d)
		if r.OK() || !strings.Contains(r.String(), c.want) {
			t.Errorf("%s: want a problem mentioning %q, got:\n%s", c.name, c.want, r)
		}
	}
}

// The harness's oracle is written independently of package keys; on the hostile corpus they must agree (for
// envelopes that reach extraction). A disagreement names the envelope.
func TestOracleAgreesWithKeys(t *testing.T) {
	src, err := keys.LoadSources([]byte(StandardSources))
	if err != nil {
		t.Fatal(err)
	}
	var x keys.Extractor
	rng := rand.New(rand.NewPCG(uint64(seed), 9))
	envs := append(Hostile(rng, 2000), Mixed(MixOptions{N: 2000, Tenants: []string{"acme"}, DupFrac: 0.3, BadFrac: 0.05, Seed: uint64(seed)})...)
	bad := 0
	for _, e := range envs {
		if e.Exp.Kind == DeadLetter || e.Exp.Reason == "unverified" {
			continue
		}
		parts := strings.Split(e.Subject, ".")
		spec := src.Specs[parts[2]]
		key, reason := x.Extract(spec, keys.NATSHeaders(e.Header), e.Body)
		var got Expect
		if reason != keys.ReasonNone {
			got = Expect{Kind: Unkeyed, Reason: string(reason)}
		} else {
			got = Expect{Kind: Keyed, Key: keys.IdempotencyHeader(parts[1], parts[2], key)}
		}
		if got.Kind != e.Exp.Kind || got.Key != e.Exp.Key || got.Reason != e.Exp.Reason {
			bad++
			if bad <= 10 {
				t.Errorf("%s (headers %s, body %d bytes %.80q): oracle %v %q %q, keys %v %q %q",
					e.Subject, shortHeaders(e.Header), len(e.Body), e.Body, e.Exp.Kind, e.Exp.Key, e.Exp.Reason, got.Kind, got.Key, got.Reason)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d envelopes: the oracle and package keys disagree", bad, len(envs))
	}
}

func shortHeaders(h nats.Header) string {
	var parts []string
	for k, vs := range h {
		for _, v := range vs {
			if len(v) > 40 {
				v = v[:40] + "..."
			}
			parts = append(parts, k+"="+v)
		}
	}
	return strings.Join(parts, ",")
}
