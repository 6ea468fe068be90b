package hashing_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/dedupeworker/dedupeworker/hashing"
)

// object writes {"n0":v0,...} with the values from vals.
func object(names []string, vals func(k int) string) string {
	var b strings.Builder
	b.WriteByte('{')
	for k, n := range names {
		if k > 0 {
			b.WriteByte(',')
		}
		q, _ := json.Marshal(n)
		b.Write(q)
		b.WriteByte(':')
		b.WriteString(vals(k))
	}
	b.WriteByte('}')
	return b.String()
}

func array(elems []string) string { return "[" + strings.Join(elems, ",") + "]" }

func repeat(n int, f func(i int) string) []string {
	s := make([]string, n)
	for i := range s {
		s[i] = f(i)
	}
	return s
}

func num(k int) string { return strconv.Itoa(k) }

// scrambled are twelve names in an order far from sorted, some sharing their first eight bytes.
var scrambled = []string{"zeta", "repository_url", "alpha", "repository_id", "mid", "b", "followers_url",
	"following_url", "", "a", "Zed", "é"}

// manyShapes is an object of twenty members whose names, and so shape, depend on i.
func manyShapes(i int) string {
	return object(repeat(20, func(k int) string { return fmt.Sprintf("f%d_%d", (k*7)%20, i) }), num)
}

// TestSortCache runs sequences of payloads through one working state, so that later objects meet the orders its
// sort cache recorded for earlier ones, and checks every digest against the independent naive implementation and a
// state that has seen nothing.
func TestSortCache(t *testing.T) {
	collideA := []string{"zz", "abcdefgh_2", "yy", "abcdefgh_1", "xx", "ww", "vv", "uu", "tt"}
	collideB := []string{"zz", "abcdefgh_1", "yy", "abcdefgh_2", "xx", "ww", "vv", "uu", "tt"} // same prefixes
	collideC := []string{"zz", "abcdefgh_2x", "yy", "abcdefgh_1x", "xx", "ww", "vv", "uu", "tt"}
	dupB := []string{"zz", "abcdefgh_1", "yy", "abcdefgh_1", "xx", "ww", "vv", "uu", "tt"} // A's prefixes
	padded := []string{"a\u0000", "b", "a", "c", "a\u0000\u0000", "d", "e", "f", "g"}      // equal zero-padded prefixes

	r := rand.New(rand.NewPCG(3, 4))
	perms := repeat(40, func(int) string {
		names := append([]string(nil), scrambled...)
		r.Shuffle(len(names), func(i, j int) { names[i], names[j] = names[j], names[i] })
		return object(names, func(k int) string { return strconv.Quote(names[k]) })
	})
	var orders []string
	for _, p := range perms {
		orders = append(orders, p, p)
	}

	big := repeat(hashing.MaxCachedMembers+50, func(i int) string { return fmt.Sprintf("m%05d", (i*7919)%10007) })

	tests := []struct {
		name     string
		payloads []string
		hits     bool // some object must take a cached order
		fails    bool // some cached order must fail its check
		sameAll  bool // every payload must have the same digest
	}{
		{
			name: "same shape many times",
			payloads: repeat(3, func(int) string {
				return array(repeat(200, func(i int) string {
					return object(scrambled, func(k int) string { return strconv.Itoa(i*100 + k) })
				}))
			}),
			hits: true,
		},
		{
			name: "prefixes collide, later bytes order differently",
			payloads: []string{array(repeat(20, func(i int) string {
				if i%2 == 0 {
					return object(collideA, num)
				}
				return object(collideB, num)
			}))},
			fails: true,
		},
		{
			name:     "prefixes collide, later bytes order the same",
			payloads: []string{array([]string{object(collideA, num), object(collideC, num), object(collideA, num)})},
			hits:     true,
		},
		{
			name:     "zero-padded prefixes",
			payloads: repeat(4, func(int) string { return array(repeat(5, func(i int) string { return object(padded, num) })) }),
			hits:     true,
		},
		{
			name:     "duplicate names behind a cached order, last wins",
			payloads: []string{object(collideA, num), array(repeat(5, func(int) string { return object(dupB, num) }))},
			fails:    true,
		},
		{
			name: "duplicate names repeated",
			payloads: repeat(3, func(int) string {
				names := append(append([]string(nil), scrambled...), "alpha", "zeta", "mid")
				return array(repeat(10, func(i int) string { return object(names, num) }))
			}),
		},
		{
			name:     "duplicates in small objects",
			payloads: repeat(3, func(int) string { return `[{"b":1,"a":1,"b":2,"a":3},{"":1,"":2},{"x":1}]` }),
		},
		{
			name:     "members in different orders",
			payloads: orders,
			hits:     true,
			sameAll:  true,
		},
		{
			// The first payload cycles through more shapes than the arena holds, so that it is emptied on the way
			// (and nothing is ever a hit); the second repeats a few of them, which are hits again.
			name: "more shapes than the cache holds",
			payloads: []string{
				array(repeat(2*hashing.PermArenaLen/20, manyShapes)),
				array(repeat(200, func(i int) string { return manyShapes(i % 10) })),
				array(repeat(2*hashing.PermArenaLen/20, manyShapes)),
			},
			hits: true,
		},
		{
			name:     "objects too large to cache",
			payloads: repeat(2, func(int) string { return array([]string{object(big, num), object(big, num)}) }),
		},
	}
	h := mustNew(t, hashing.Options{})
	for _, tt := range tests {
		t.Run(strings.ReplaceAll(tt.name, " ", "_"), func(t *testing.T) {
			cs := hashing.NewCacheState()
			var first string
			for n, p := range tt.payloads {
				got, err := cs.Digest(h, []byte(p))
				if err != nil {
					t.Fatalf("payload %d: %v", n, err)
				}
				fresh, err := hashing.NewCacheState().Digest(h, []byte(p))
				if err != nil {
					t.Fatal(err)
				}
				want, err := naiveDigest([]byte(p))
				if err != nil {
					t.Fatal(err)
				}
				if got != want || fresh != want {
					var c bytes.Buffer
					h.Canonical(&c, []byte(p))
					t.Fatalf("payload %d: digest %s, fresh state %s, naive %s\npayload   %.300s\ncanonical %.300s", n, got,
						fresh, want, p, c.String())
				}
				if n == 0 {
					first = got
				} else if tt.sameAll && got != first {
					t.Fatalf("payload %d: digest %s differs from payload 0's %s", n, got, first)
				}
			}
			hits, misses, fails := cs.Stats()
			t.Logf("hits %d, misses %d, failed checks %d", hits, misses, fails)
			if tt.hits && hits == 0 {
				t.Error("no object took a cached order")
			}
			if tt.fails && fails == 0 {
				t.Error("no cached order failed its check")
			}
		})
	}
}

// TestSortCacheCanonical pins the canonical stream where a cached order must be rejected: same prefixes, names
// ordered differently by their later bytes, and a duplicate name (the last occurrence wins).
func TestSortCacheCanonical(t *testing.T) {
	h := mustNew(t, hashing.Options{})
	cs := hashing.NewCacheState()
	in := []string{
		`{"zz":0,"abcdefgh_2":1,"yy":2,"abcdefgh_1":3,"xx":4,"ww":5,"vv":6,"uu":7}`,
		`{"zz":0,"abcdefgh_1":1,"yy":2,"abcdefgh_2":3,"xx":4,"ww":5,"vv":6,"uu":7}`,
		`{"zz":0,"abcdefgh_1":1,"yy":2,"abcdefgh_1":3,"xx":4,"ww":5,"vv":6,"uu":7}`,
	}
	want := []string{
		`{"abcdefgh_1":3,"abcdefgh_2":1,"uu":7,"vv":6,"ww":5,"xx":4,"yy":2,"zz":0,}`,
		`{"abcdefgh_1":1,"abcdefgh_2":3,"uu":7,"vv":6,"ww":5,"xx":4,"yy":2,"zz":0,}`,
		`{"abcdefgh_1":3,"uu":7,"vv":6,"ww":5,"xx":4,"yy":2,"zz":0,}`,
	}
	for k := range in {
		got, err := cs.Digest(h, []byte(in[k]))
		if err != nil {
			t.Fatal(err)
		}
		if c := canon(t, h, in[k]); c != want[k] {
			t.Errorf("canonical of %s = %s, want %s", in[k], c, want[k])
		}
		if w := sha256Hex(want[k]); got != w {
			t.Errorf("digest of %s after the earlier payloads = %s, want sha256 of %s = %s", in[k], got, want[k], w)
		}
	}
	if _, _, fails := cs.Stats(); fails != 2 {
		t.Errorf("%d failed checks, want 2 (the second and third objects meet the first's order)", fails)
	}
}

// TestSortCacheSelections checks that only and except, which hash a filtered member sequence, agree with hashing
// the filtered payload directly while the cache holds the unfiltered shape.
func TestSortCacheSelections(t *testing.T) {
	users := func(skip0 string, n int) string {
		return `{"users":` + array(repeat(n, func(i int) string {
			names := scrambled
			if i == 0 && skip0 != "" {
				names = nil
				for _, s := range scrambled {
					if s != skip0 {
						names = append(names, s)
					}
				}
			}
			return object(names, func(k int) string { return strconv.Quote(names[k]) })
		})) + `}`
	}
	all := mustNew(t, hashing.Options{})
	except := mustNew(t, hashing.Options{Except: []string{".users[0].mid"}})
	only := mustNew(t, hashing.Options{Only: []string{".users[1].alpha", ".users[1].zeta", ".users[0]"}})
	cs := hashing.NewCacheState()
	for range 3 {
		got, err := cs.Digest(except, []byte(users("", 30)))
		if err != nil {
			t.Fatal(err)
		}
		if want, _ := naiveDigest([]byte(users("mid", 30))); got != want {
			t.Errorf("except digest %s, want %s", got, want)
		}
		got, err = cs.Digest(only, []byte(users("", 30)))
		if err != nil {
			t.Fatal(err)
		}
		want := `{"users":[` + object(scrambled, func(k int) string { return strconv.Quote(scrambled[k]) }) +
			`,{"alpha":"alpha","zeta":"zeta"}]}`
		if w, _ := naiveDigest([]byte(want)); got != w {
			t.Errorf("only digest %s, want %s", got, w)
		}
		if _, err := cs.Digest(all, []byte(users("", 30))); err != nil {
			t.Fatal(err)
		}
	}
}

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
