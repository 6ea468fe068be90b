package main

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go"
)

// Source ids of the workload and the sources document the worker gets for them.
const (
	srcHeader  = "gh"     // preset github: header X-GitHub-Delivery
	srcJSON    = "orders" // {json: data.order.id}
	srcPayload = "forms"  // {payload: {}}: digest of the whole body
	srcNone    = "legacy" // declared without dedupe
)

// sourcesYAML is DEDUPE_SOURCES for the worker: one source per key kind of the workload.
const sourcesYAML = `sources:
  gh: {dedupe: github}
  orders: {dedupe: {json: data.order.id}}
  forms: {dedupe: {payload: {}}}
  legacy: {}
`

// sourceMix is the share of unique events per source (it is also the share of envelopes, since duplicates copy
// uniformly chosen events).
var sourceMix = []struct {
	id    string
	share float64
}{{srcHeader, 0.40}, {srcJSON, 0.30}, {srcPayload, 0.20}, {srcNone, 0.10}}

const (
	numTenants   = 8
	dupShare     = 0.25 // share of envelopes that repeat an earlier event
	headerSigLen = 64
)

// WorkloadConfig says what to generate.
type WorkloadConfig struct {
	N    int    // envelopes
	Seed uint64 // same seed, same corpus: same workload, byte for byte
}

// Event is one unique webhook event; every envelope is a delivery of one event.
type Event struct {
	Tenant string
	Source string
	// Key is the event key the bench uses for floor and native (a stand-in for the worker's key with the same
	// uniqueness and a realistic length); "" for the unkeyed source.
	Key    string
	Corpus int    // which corpus body the event's body is built from
	Nonce  string // what makes the body unique (forms) or the delivery id (gh) / order id (orders)
}

// Envelope is one delivery, in publish order.
type Envelope struct {
	Event int // index into Workload.Events
	// Attempt is 1 for the first delivery of the event, 2 and more for provider retries (the duplicates).
	Attempt int
}

// Workload is a reproducible stream of envelopes.
type Workload struct {
	Events    []Event
	Envelopes []Envelope
	corpus    *Corpus
}

// Corpus is the set of webhook bodies envelopes are built from.
type Corpus struct {
	Bodies [][]byte
	Names  []string // event type (the folder name for the GitHub corpus)
	Origin string   // the directory read, or "generated"
}

// LoadCorpus reads every *.json below dir (sorted by path, so that a seed picks the same bodies everywhere).
func LoadCorpus(dir string) (*Corpus, error) {
	var paths []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".json") {
			paths = append(paths, p)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("corpus %s: %w", dir, err)
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("corpus %s: no *.json files", dir)
	}
	sort.Strings(paths)
	c := &Corpus{Origin: dir}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("corpus: %w", err)
		}
		c.Bodies = append(c.Bodies, b)
		c.Names = append(c.Names, filepath.Base(filepath.Dir(p)))
	}
	return c, nil
}

// GeneratedCorpus makes n JSON bodies of 1–30 KiB, for machines without the shared corpus.
func GeneratedCorpus(seed uint64, n int) *Corpus {
	r := rand.New(rand.NewPCG(seed, 0x636f72707573))
	actions := []string{"opened", "closed", "created", "deleted", "edited", "synchronize", "completed"}
	c := &Corpus{Origin: "generated"}
	for i := 0; i < n; i++ {
		size := 1024 + r.IntN(29*1024)
		var b strings.Builder
		b.Grow(size + 256)
		action := actions[r.IntN(len(actions))]
		fmt.Fprintf(&b, `{"action":%q,"number":%d,"repository":{"id":%d,"full_name":"acme/repo-%d","private":false},"items":[`,
			action, r.IntN(100000), r.Int64N(1<<40), r.IntN(1000))
		for j := 0; b.Len() < size; j++ {
			if j > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"id":%d,"sha":"%016x%016x","message":"change %d of the widget","additions":%d,"deletions":%d}`,
				j, r.Uint64(), r.Uint64(), j, r.IntN(500), r.IntN(500))
		}
		b.WriteString("]}")
		c.Bodies = append(c.Bodies, []byte(b.String()))
		c.Names = append(c.Names, action)
	}
	return c
}

// FindCorpus returns the corpus directory: flag, else ../shared/corpus/github relative to the working directory
// or to the worker's module root above it; "" when none exists.
func FindCorpus(flagValue string) string {
	if flagValue != "" {
		return flagValue
	}
	var candidates []string
	if wd, err := os.Getwd(); err == nil {
		candidates = append(candidates, filepath.Join(wd, "..", "shared", "corpus", "github"))
		if root, err := productRoot(wd); err == nil {
			candidates = append(candidates, filepath.Join(root, "..", "shared", "corpus", "github"))
		}
	}
	for _, c := range candidates {
		if st, err := os.Stat(c); err == nil && st.IsDir() {
			return filepath.Clean(c)
		}
	}
	return ""
}

// NewWorkload generates the workload. Unique events get a source by sourceMix and a tenant uniformly; then
// dupShare of the envelopes are re-deliveries of earlier events: half adjacent (within 3 envelopes), 30% near
// (10–100 later), 20% far (1,000–10,000 later).
func NewWorkload(cfg WorkloadConfig, corpus *Corpus) *Workload {
	r := rand.New(rand.NewPCG(cfg.Seed, 0x6465647570))
	dups := int(float64(cfg.N)*dupShare + 0.5)
	uniques := cfg.N - dups
	w := &Workload{corpus: corpus, Events: make([]Event, uniques)}
	for i := range w.Events {
		e := &w.Events[i]
		e.Tenant = "tenant-" + strconv.Itoa(r.IntN(numTenants))
		x := r.Float64()
		e.Source = sourceMix[len(sourceMix)-1].id
		for _, s := range sourceMix {
			if x < s.share {
				e.Source = s.id
				break
			}
			x -= s.share
		}
		e.Corpus = r.IntN(len(corpus.Bodies))
		// The event index in the low bits keeps ids unique whatever the random bits are.
		hi, lo := r.Uint64(), r.Uint64()&^0xffffffff|uint64(i)
		switch e.Source {
		case srcHeader: // a GitHub delivery GUID
			var b [16]byte
			binary.BigEndian.PutUint64(b[:8], hi)
			binary.BigEndian.PutUint64(b[8:], lo)
			h := hex.EncodeToString(b[:])
			e.Nonce = h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
			e.Key = e.Nonce
		case srcJSON:
			e.Nonce = fmt.Sprintf("ord_%016x%08x", hi, uint32(i))
			e.Key = e.Nonce
		case srcPayload:
			e.Nonce = fmt.Sprintf("sub_%016x%08x", hi, uint32(i))
			// The worker's key is a 64-hex-digit digest of the body; the body is unique through Nonce, so a
			// same-length stand-in derived from it is as unique.
			e.Key = fmt.Sprintf("%016x%016x%016x%016x", hi, lo, hi^0x5bd1e995, lo^uint64(i)<<32)
		case srcNone:
			e.Nonce = fmt.Sprintf("lg_%016x%08x", hi, uint32(i))
		}
	}
	// Positions: event i is first delivered at i; a duplicate lands at a later fractional position.
	type placed struct {
		pos     float64
		env     Envelope
		ordinal int
	}
	all := make([]placed, 0, cfg.N)
	for i := 0; i < uniques; i++ {
		all = append(all, placed{pos: float64(i), env: Envelope{Event: i, Attempt: 1}, ordinal: len(all)})
	}
	attempts := make([]int, uniques)
	for i := range attempts {
		attempts[i] = 1
	}
	for d := 0; d < dups && uniques > 0; d++ {
		ev := r.IntN(uniques)
		var off float64
		switch x := r.Float64(); {
		case x < 0.5:
			off = 0.5 + float64(r.IntN(3))
		case x < 0.8:
			off = 10 + float64(r.IntN(91))
		default:
			off = 1000 + float64(r.IntN(9001))
		}
		off += r.Float64() * 0.4
		pos := float64(ev) + off
		if pos > float64(uniques) {
			pos = float64(uniques) + r.Float64()
		}
		attempts[ev]++
		all = append(all, placed{pos: pos, env: Envelope{Event: ev}, ordinal: len(all)})
	}
	sort.SliceStable(all, func(a, b int) bool {
		if all[a].pos != all[b].pos {
			return all[a].pos < all[b].pos
		}
		return all[a].ordinal < all[b].ordinal
	})
	seen := make([]int, uniques)
	w.Envelopes = make([]Envelope, len(all))
	for i, p := range all {
		seen[p.env.Event]++
		w.Envelopes[i] = Envelope{Event: p.env.Event, Attempt: seen[p.env.Event]}
	}
	return w
}

// Prefix returns the workload cut to its first n envelopes (same events, fewer deliveries).
func (w *Workload) Prefix(n int) *Workload {
	if n >= len(w.Envelopes) {
		return w
	}
	return &Workload{Events: w.Events, Envelopes: w.Envelopes[:n], corpus: w.corpus}
}

// Expected returns how many outputs a correct deduplicator produces: one per distinct (tenant, source, key)
// among keyed envelopes, plus every unkeyed envelope. It counts from the envelopes' contents, not from the
// generator's bookkeeping.
func (w *Workload) Expected() int {
	keyed := make(map[string]struct{}, len(w.Envelopes))
	unkeyed := 0
	for _, env := range w.Envelopes {
		e := &w.Events[env.Event]
		if e.Key == "" {
			unkeyed++
			continue
		}
		keyed[e.Tenant+"\x00"+e.Source+"\x00"+e.Key] = struct{}{}
	}
	return len(keyed) + unkeyed
}

// KeyedUnique is the number of distinct keys among the envelopes (what a dedupe window must remember).
func (w *Workload) KeyedUnique() int {
	return w.Expected() - w.Unkeyed()
}

// Unkeyed is the number of envelopes of the unkeyed source.
func (w *Workload) Unkeyed() int {
	n := 0
	for _, env := range w.Envelopes {
		if w.Events[env.Event].Key == "" {
			n++
		}
	}
	return n
}

// Subject is the ingest subject of envelope i.
func (w *Workload) Subject(i int) string {
	e := &w.Events[w.Envelopes[i].Event]
	return inputPrefix + "." + e.Tenant + "." + e.Source
}

// Body builds envelope i's body. Retries of a gh or forms event are byte-identical to the first delivery; a
// retry of an orders event carries a different delivery_attempt (the key is in the JSON, not the bytes).
func (w *Workload) Body(i int) []byte {
	env := w.Envelopes[i]
	e := &w.Events[env.Event]
	inner := w.corpus.Bodies[e.Corpus]
	switch e.Source {
	case srcJSON:
		b := make([]byte, 0, len(inner)+128)
		b = append(b, `{"type":"order.updated","delivery_attempt":`...)
		b = strconv.AppendInt(b, int64(env.Attempt), 10)
		b = append(b, `,"data":{"order":{"id":"`...)
		b = append(b, e.Nonce...)
		b = append(b, `","tenant":"`...)
		b = append(b, e.Tenant...)
		b = append(b, `","detail":`...)
		b = append(b, inner...)
		return append(b, "}}}"...)
	case srcPayload:
		b := make([]byte, 0, len(inner)+96)
		b = append(b, `{"form":"contact","submission_id":"`...)
		b = append(b, e.Nonce...)
		b = append(b, `","fields":`...)
		b = append(b, inner...)
		return append(b, '}')
	default:
		return inner
	}
}

// Header builds envelope i's headers (the HTTP headers of the delivery, as ingest publishes them), plus
// Bench-Index (the envelope's index, which floor uses to find its precomputed key).
func (w *Workload) Header(i int) nats.Header {
	env := w.Envelopes[i]
	e := &w.Events[env.Event]
	h := nats.Header{}
	h.Set("Content-Type", "application/json")
	h.Set(hdrIndex, strconv.Itoa(i))
	switch e.Source {
	case srcHeader:
		h.Set("User-Agent", "GitHub-Hookshot/2b3f4c1")
		h.Set("X-GitHub-Event", w.corpus.Names[e.Corpus])
		h.Set("X-GitHub-Delivery", e.Nonce)
		h.Set("X-GitHub-Hook-ID", "371299123")
		h.Set("X-GitHub-Hook-Installation-Target-Type", "repository")
		h.Set("X-Hub-Signature-256", "sha256="+strings.Repeat(e.Nonce[:8], headerSigLen/8))
	case srcJSON:
		h.Set("User-Agent", "Orders-Webhooks/1.0")
		h.Set("X-Delivery-Attempt", strconv.Itoa(env.Attempt))
	case srcPayload:
		h.Set("User-Agent", "FormsBackend/3.2")
	case srcNone:
		h.Set("User-Agent", "LegacyNotifier/0.9")
	}
	return h
}

// Msg builds envelope i as a NATS message.
func (w *Workload) Msg(i int) *nats.Msg {
	return &nats.Msg{Subject: w.Subject(i), Header: w.Header(i), Data: w.Body(i)}
}

// IdempotencyKey is tenant:source:key, as the worker stamps it (and as native uses it for Nats-Msg-Id).
func (w *Workload) IdempotencyKey(i int) string {
	e := &w.Events[w.Envelopes[i].Event]
	if e.Key == "" {
		return ""
	}
	return e.Tenant + ":" + e.Source + ":" + e.Key
}

// KVKey is the window key of envelope i in kvwindow's layout: <tenant>.<source>.<enc>, enc the unpadded
// base64url of the key when at most 48 bytes, else "=" and the base64url of a 32-byte digest (here: of the
// stand-in key, since floor does not hash).
func (w *Workload) KVKey(i int) string {
	e := &w.Events[w.Envelopes[i].Event]
	if e.Key == "" {
		return ""
	}
	var enc string
	if len(e.Key) <= 48 {
		enc = base64.RawURLEncoding.EncodeToString([]byte(e.Key))
	} else {
		raw, err := hex.DecodeString(e.Key)
		if err != nil || len(raw) != 32 {
			raw = []byte(e.Key)[:32]
		}
		enc = "=" + base64.RawURLEncoding.EncodeToString(raw)
	}
	return e.Tenant + "." + e.Source + "." + enc
}

// WorkloadStats summarises the workload for the report (BodyBytes counts the corpus bodies, without the few
// bytes of wrapping orders and forms bodies get).
type WorkloadStats struct {
	Envelopes, Expected, Unkeyed, KeyedUnique, Duplicates int
	BySource                                              map[string]int
	BodyBytes                                             int64
}

// Stats counts the workload's envelopes by source, its duplicates and its expected outputs.
func (w *Workload) Stats() WorkloadStats {
	s := WorkloadStats{Envelopes: len(w.Envelopes), BySource: map[string]int{}}
	for _, env := range w.Envelopes {
		e := &w.Events[env.Event]
		s.BySource[e.Source]++
		if env.Attempt > 1 {
			s.Duplicates++
		}
		s.BodyBytes += int64(len(w.corpus.Bodies[e.Corpus]))
	}
	s.Expected = w.Expected()
	s.Unkeyed = w.Unkeyed()
	s.KeyedUnique = s.Expected - s.Unkeyed
	return s
}
