package kvwindow_test

import (
	"strings"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/kvwindow"
)

func TestValueRoundTrip(t *testing.T) {
	long := strings.Repeat("k", kvwindow.MaxRawKey+1)
	for _, tc := range []struct {
		name      string
		c         kvwindow.Claim
		firstMs   int64
		published bool
		wantKey   string
		maxLen    int
	}{
		{"typical", kvwindow.Claim{Key: "evt_1NqYv2LkdIwHu7ix0abcdEFG", Claimant: envelope(123_456), Delivery: delivery(1)},
			1_700_000_000_123 + 5_000, false, "", 32},
		{"published", kvwindow.Claim{Key: "k", Claimant: envelope(1), Delivery: delivery(2)}, 1_700_000_000_000, true, "", 32},
		{"hashed key", kvwindow.Claim{Key: long, Claimant: envelope(9), Delivery: delivery(3)}, 1_700_000_000_000, false, long, 32 + len(long)},
		{"unknown stamp and consumer", kvwindow.Claim{Key: "k", Claimant: kvwindow.Claimant{Seq: 7}}, 1_700_000_000_000, false, "", 16},
		{"extremes", kvwindow.Claim{Key: "k", Claimant: kvwindow.Claimant{Seq: 1<<64 - 1, Stamp: -1 << 63},
			Delivery: kvwindow.Delivery{Consumer: 1<<63 - 1, Count: 1<<64 - 1}}, 1<<62 - 1, true, "", 64},
		{"claim before the stamp (clock skew)", kvwindow.Claim{Key: "k", Claimant: envelope(5), Delivery: delivery(1)},
			envelope(5).Stamp/int64(time.Millisecond) - 10_000, false, "", 32},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := kvwindow.EncodeValue(tc.c, tc.firstMs, tc.published)
			if len(b) > tc.maxLen || b[0] != 0x01 {
				t.Fatalf("encoded %d bytes % x, want at most %d starting 0x01", len(b), b, tc.maxLen)
			}
			v, ok := kvwindow.DecodeValue(b)
			if !ok || v.Claimant != tc.c.Claimant || v.Delivery != tc.c.Delivery || v.FirstMs != tc.firstMs ||
				v.Published != tc.published || v.Key != tc.wantKey {
				t.Fatalf("decoded %+v %v", v, ok)
			}
			for i := 1; i < len(b); i++ {
				if tc.wantKey != "" && i > len(b)-len(tc.wantKey)+kvwindow.MaxRawKey {
					break // a key cut to more than MaxRawKey bytes still decodes (the key is the rest of the value)
				}
				if _, ok := kvwindow.DecodeValue(b[:i]); ok {
					t.Fatalf("a value cut to %d of %d bytes decoded", i, len(b))
				}
			}
		})
	}
	for _, bad := range []string{"", "\x02anything", "{", "hello", "\x01"} {
		if _, ok := kvwindow.DecodeValue([]byte(bad)); ok {
			t.Errorf("%q decoded", bad)
		}
	}
	// JSON values of untagged builds are not read (see the package's compatibility policy).
	if v, ok := kvwindow.DecodeValue([]byte(`{"seq":3,"ts":4,"con":5,"dlv":6,"at":7,"ttl":8,"key":"x","pub":true}`)); ok {
		t.Fatalf("a JSON claim value decoded: %+v", v)
	}
}

func TestScopeOf(t *testing.T) {
	for _, tc := range []struct {
		kvKey, tenant, source, key string
		ok                         bool
	}{
		{"acme.gh.YS5iIGMqPg", "acme", "gh", "a.b c*>", true},
		{"acme.gh.=VbuYI-aOBfccEFOVuHKDr8huVJ4fHKRZixzHpt0tOsg", "acme", "gh", "", true},
		{"acme.gh", "", "", "", false},
		{"acme.gh.", "", "", "", false},
		{"a*.gh.YQ", "", "", "", false},
		{"acme.gh.not base64!", "", "", "", false},
	} {
		tn, src, key, ok := kvwindow.ScopeOf(tc.kvKey)
		if tn != tc.tenant || src != tc.source || key != tc.key || ok != tc.ok {
			t.Errorf("ScopeOf(%q) = %q %q %q %v", tc.kvKey, tn, src, key, ok)
		}
	}
	for _, key := range []string{"a", "evt_1", strings.Repeat("x", kvwindow.MaxRawKey), "\x00\xff"} {
		k, _ := kvwindow.KVKey("t", "s", key)
		if _, _, got, ok := kvwindow.ScopeOf(k); !ok || got != key {
			t.Errorf("ScopeOf(KVKey(%q)) = %q %v", key, got, ok)
		}
	}
}

// FuzzClaimValue: any stored bytes decode without panicking, and whatever decodes as a compact value encodes back
// to the same claim.
func FuzzClaimValue(f *testing.F) {
	f.Add([]byte(`{"seq":7,"at":1717171717000,"ttl":60,"key":"old"}`))
	f.Add(kvwindow.EncodeValue(kvwindow.Claim{Key: "k", Claimant: envelope(1), Delivery: delivery(1)}, 1_700_000_000_000, true))
	f.Add(kvwindow.EncodeValue(kvwindow.Claim{Key: strings.Repeat("x", 60), Claimant: envelope(2)}, 1, false))
	f.Add([]byte{0x01, 0x80})
	f.Fuzz(func(t *testing.T, b []byte) {
		v, ok := kvwindow.DecodeValue(b)
		if !ok {
			return
		}
		c := kvwindow.Claim{Key: v.Key, Claimant: v.Claimant, Delivery: v.Delivery}
		if v.Key == "" {
			c.Key = "k" // raw keys are not in the value
		}
		again, ok := kvwindow.DecodeValue(kvwindow.EncodeValue(c, v.FirstMs, v.Published))
		if !ok || again.Claimant != v.Claimant || again.Delivery != v.Delivery || again.FirstMs != v.FirstMs || again.Published != v.Published {
			t.Fatalf("% x decoded %+v, re-encoded decodes %+v %v", b, v, again, ok)
		}
		if v.Key != "" && len(v.Key) > kvwindow.MaxRawKey && again.Key != v.Key {
			t.Fatalf("key %q lost", v.Key)
		}
	})
}
