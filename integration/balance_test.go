package integration

// The ledger: what was published, what came out, and a readable diff between the two.

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Kind is the outcome class an envelope must end in.
type Kind int

const (
	// Keyed: the envelope has an event key; exactly one envelope per key is republished (Dedupe-Status unique),
	// the others are duplicates (acked, not republished).
	Keyed Kind = iota + 1
	// Unkeyed: republished without dedupe (Dedupe-Status unkeyed, Dedupe-Reason Reason), once per envelope.
	Unkeyed
	// DeadLetter: published to the dead-letter stream, once per envelope.
	DeadLetter
)

func (k Kind) String() string {
	switch k {
	case Keyed:
		return "keyed"
	case Unkeyed:
		return "unkeyed"
	case DeadLetter:
		return "dead-letter"
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// Wire names of the contract.
const (
	InputStream  = "INGEST"
	OutputStream = "DEDUPED"
	DLQStream    = "DEDUPE_DLQ"
	InputPrefix  = "ingest"
	OutputPrefix = "deduped"
	DLQPrefix    = "dedupe.dlq"

	HdrIdempotencyKey = "Idempotency-Key"
	HdrMsgID          = "Nats-Msg-Id"
	HdrKey            = "Dedupe-Key"
	HdrStatus         = "Dedupe-Status"
	HdrReason         = "Dedupe-Reason"
	HdrError          = "Dedupe-Error"
	HdrSubject        = "Dedupe-Subject"
	// HdrEnvelope is set by the harness on every envelope it publishes (its index); not part of the contract.
	HdrEnvelope = "X-Test-Envelope"
)

// Expect is what the harness predicts for one published envelope, computed from the envelope itself.
type Expect struct {
	Seq     uint64 // stream sequence in INGEST (from the PubAck)
	Subject string // the subject it was published to
	Kind    Kind
	Key     string // Keyed: the Idempotency-Key "<tenant>:<source>:<key>"
	Reason  string // Unkeyed: the Dedupe-Reason
	Body    uint64 // BodyHash of the body
}

// Record is one message read back from DEDUPED or DEDUPE_DLQ: the contract headers and a hash of the body.
type Record struct {
	Seq                                          uint64
	Subject                                      string
	IdemKey, MsgID, Key, Status, Reason, Err, In string
	Envelope                                     string
	Body                                         uint64
	Size                                         int
	// Forged lists contract headers present in another spelling or with several values: something the worker
	// let through from the inbound envelope instead of owning (a dead letter may keep the delivery's own
	// Idempotency-Key).
	Forged []string
}

var contractHeaders = []string{HdrIdempotencyKey, HdrMsgID, HdrKey, HdrStatus, HdrReason, HdrError, HdrSubject}

func forged(h map[string][]string, deadLetter bool) []string {
	var out []string
	for name, vs := range h {
		for _, c := range contractHeaders {
			if deadLetter && c == HdrIdempotencyKey {
				continue // a dead letter keeps the delivery's own Idempotency-Key, whatever its spelling
			}
			if strings.EqualFold(name, c) && (name != c || len(vs) > 1) {
				out = append(out, fmt.Sprintf("%s (%d values)", name, len(vs)))
			}
		}
	}
	sort.Strings(out)
	return out
}

// BodyHash is the 64-bit FNV-1a of a body (compared, never stored whole).
func BodyHash(b []byte) uint64 {
	h := fnv.New64a()
	_, _ = h.Write(b)
	return h.Sum64()
}

// ReadStream reads every message of a stream with an ordered consumer. A missing or empty stream reads as
// nothing. It expects the stream to be quiet (it stops at the last sequence it saw when it started).
func ReadStream(ctx context.Context, js jetstream.JetStream, name string) ([]Record, error) {
	out, err := readOrdered(ctx, js, name)
	if err == nil {
		return out, nil
	}
	// An ordered consumer created just after a cluster's leader changes can sit without a message for longer than
	// the read allows; the stream itself is fine. Read it message by message from the stream leader instead.
	out, err2 := readByGet(ctx, js, name)
	if err2 != nil {
		return out, errors.Join(err, err2)
	}
	return out, nil
}

// readByGet reads every message of the stream with one get per sequence.
func readByGet(ctx context.Context, js jetstream.JetStream, name string) ([]Record, error) {
	st, err := js.Stream(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("ledger: stream %s: %w", name, err)
	}
	state := st.CachedInfo().State
	out := make([]Record, 0, state.Msgs)
	for seq := state.FirstSeq; seq <= state.LastSeq && state.Msgs > 0; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue // deleted (purged by the test, or an interior delete)
		}
		if err != nil {
			return out, fmt.Errorf("ledger: get %s message %d: %w", name, seq, err)
		}
		out = append(out, record(name, m.Sequence, m.Subject, m.Header, m.Data))
	}
	return out, nil
}

// record is what the ledger keeps of one stored message.
func record(stream string, seq uint64, subject string, h nats.Header, data []byte) Record {
	return Record{
		Seq:      seq,
		Subject:  subject,
		IdemKey:  h.Get(HdrIdempotencyKey),
		MsgID:    h.Get(HdrMsgID),
		Key:      h.Get(HdrKey),
		Status:   h.Get(HdrStatus),
		Reason:   h.Get(HdrReason),
		Err:      h.Get(HdrError),
		In:       h.Get(HdrSubject),
		Envelope: h.Get(HdrEnvelope),
		Body:     BodyHash(data),
		Size:     len(data),
		Forged:   forged(h, stream == DLQStream),
	}
}

func readOrdered(ctx context.Context, js jetstream.JetStream, name string) ([]Record, error) {
	st, err := js.Stream(ctx, name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("ledger: stream %s: %w", name, err)
	}
	state := st.CachedInfo().State
	if state.Msgs == 0 {
		return nil, nil
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		return nil, fmt.Errorf("ledger: ordered consumer on %s: %w", name, err)
	}
	it, err := cons.Messages(jetstream.PullMaxMessages(512))
	if err != nil {
		return nil, fmt.Errorf("ledger: read %s: %w", name, err)
	}
	defer it.Stop()
	out := make([]Record, 0, state.Msgs)
	for {
		m, err := it.Next(jetstream.NextMaxWait(10 * time.Second))
		if err != nil {
			return out, fmt.Errorf("ledger: read %s after %d of %d messages: %w", name, len(out), state.Msgs, err)
		}
		md, err := m.Metadata()
		if err != nil {
			return out, fmt.Errorf("ledger: read %s: metadata: %w", name, err)
		}
		out = append(out, record(name, md.Sequence.Stream, m.Subject(), m.Headers(), m.Data()))
		if md.Sequence.Stream >= state.LastSeq || md.NumPending == 0 {
			return out, nil
		}
	}
}

// Report is the balanced (or not) ledger of one run.
type Report struct {
	Published, Unique, Duplicate, Unkeyed, DeadLettered int
	// Purged counts outputs that the test removed from DEDUPED (and handed to Balance as extra records).
	Purged int
	// Expected figures, computed from the envelopes.
	WantUnique, WantDuplicate, WantUnkeyed, WantDeadLettered int
	UnkeyedReasons                                           map[string]int // Dedupe-Reason → count
	DeadLetterReasons                                        map[string]int // <reason> of dedupe.dlq.<reason> → count
	Problems                                                 []string
}

// OK reports whether the ledger balances with no problem.
func (r *Report) OK() bool { return len(r.Problems) == 0 }

func (r *Report) problem(format string, args ...any) {
	r.Problems = append(r.Problems, fmt.Sprintf(format, args...))
}

// Summary is the one-line equation.
func (r *Report) Summary() string {
	state := "balanced"
	if !r.OK() {
		state = fmt.Sprintf("NOT BALANCED (%d problems)", len(r.Problems))
	}
	s := fmt.Sprintf("published %d = unique %d + duplicate %d + unkeyed %d + dead-lettered %d",
		r.Published, r.Unique, r.Duplicate, r.Unkeyed, r.DeadLettered)
	if r.Purged > 0 {
		s += fmt.Sprintf(" (%d of the outputs purged by the test and counted)", r.Purged)
	}
	return s + " — " + state
}

// String is the whole readable report: the equation, the expected figures, the reasons and every problem
// (capped per kind so that a broken run stays readable).
func (r *Report) String() string {
	var b strings.Builder
	b.WriteString("ledger: " + r.Summary() + "\n")
	fmt.Fprintf(&b, "  expected:  unique %d, duplicate %d, unkeyed %d, dead-lettered %d\n",
		r.WantUnique, r.WantDuplicate, r.WantUnkeyed, r.WantDeadLettered)
	if len(r.UnkeyedReasons) > 0 {
		b.WriteString("  unkeyed reasons: " + formatCounts(r.UnkeyedReasons) + "\n")
	}
	if len(r.DeadLetterReasons) > 0 {
		b.WriteString("  dead-letter reasons: " + formatCounts(r.DeadLetterReasons) + "\n")
	}
	for _, p := range r.Problems {
		b.WriteString("  - " + p + "\n")
	}
	return b.String()
}

func formatCounts(m map[string]int) string {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = fmt.Sprintf("%s=%d", k, m[k])
	}
	return strings.Join(parts, " ")
}

// tenantSource splits "<prefix>.<tenant>.<source>"; ok is false for any other shape.
func tenantSource(subject, prefix string) (tenant, source string, ok bool) {
	rest, found := strings.CutPrefix(subject, prefix+".")
	if !found {
		return "", "", false
	}
	parts := strings.Split(rest, ".")
	if len(parts) < 2 {
		return "", "", false
	}
	return parts[0], parts[1], true
}

// maxListed caps how many problems of one kind are listed one by one.
const maxListed = 12

type capped struct {
	r     *Report
	what  string
	count int
}

func (c *capped) add(format string, args ...any) {
	c.count++
	if c.count <= maxListed {
		c.r.problem(format, args...)
	}
}

func (c *capped) close() {
	if c.count > maxListed {
		c.r.problem("... and %d more: %s", c.count-maxListed, c.what)
	}
}

// Balance compares the expectations of every published envelope with what DEDUPED (outputs, plus any records
// the test purged from it) and DEDUPE_DLQ (deadLetters) hold. It checks:
//
//   - published = unique + duplicate + unkeyed + dead-lettered, with duplicate = published − the rest ≥ 0 and equal
//     to the number of keyed envelopes minus their distinct keys;
//   - the set of Idempotency-Keys of unique outputs equals the set expected, and none appears twice;
//   - each unique output is on deduped.<tenant>.<source> of its key, carries Nats-Msg-Id and Dedupe-Key, and its
//     body is the body of one of the envelopes with that key;
//   - each unkeyed envelope appears exactly once, as msg/INGEST/<seq>/<stamp>, with the expected Dedupe-Reason, on its
//     tenant's and source's subject and with its own body;
//   - the dead letters are exactly the envelopes expected there (matched by Dedupe-Subject), each with a
//     Dedupe-Error and a dedupe.dlq.<reason> subject.
func Balance(exp []Expect, outputs, deadLetters []Record) *Report {
	r := &Report{Published: len(exp), UnkeyedReasons: map[string]int{}, DeadLetterReasons: map[string]int{}}

	keyBodies := map[string]map[uint64]bool{} // expected key → acceptable bodies
	keyed := 0
	unkeyedBySeq := map[uint64]*Expect{}
	dlqWant := map[string]int{} // subject → count
	var badExp capped
	badExp = capped{r: r, what: "envelopes published without a sequence"}
	for i := range exp {
		e := &exp[i]
		if e.Seq == 0 {
			badExp.add("harness: envelope %d (%s) has no INGEST sequence", i, e.Subject)
		}
		switch e.Kind {
		case Keyed:
			keyed++
			if keyBodies[e.Key] == nil {
				keyBodies[e.Key] = map[uint64]bool{}
			}
			keyBodies[e.Key][e.Body] = true
		case Unkeyed:
			r.WantUnkeyed++
			unkeyedBySeq[e.Seq] = e
		case DeadLetter:
			r.WantDeadLettered++
			dlqWant[e.Subject]++
		}
	}
	badExp.close()
	r.WantUnique = len(keyBodies)
	r.WantDuplicate = keyed - len(keyBodies)

	// DEDUPED.
	seenKey := map[string][]uint64{}
	seenUnkeyed := map[uint64][]uint64{}
	bad := capped{r: r, what: "malformed outputs"}
	wrongBody := capped{r: r, what: "outputs with a body no envelope had"}
	forgedOut := capped{r: r, what: "records carrying inbound copies of contract headers"}
	for _, o := range append(append([]Record(nil), outputs...), deadLetters...) {
		if len(o.Forged) > 0 {
			forgedOut.add("record seq %d on %s carries contract headers the worker did not set: %v", o.Seq, o.Subject, o.Forged)
		}
	}
	forgedOut.close()
	for _, o := range outputs {
		switch o.Status {
		case "unique":
			r.Unique++
			seenKey[o.IdemKey] = append(seenKey[o.IdemKey], o.Seq)
			t, s, ok := tenantSource(o.Subject, OutputPrefix)
			switch {
			case !ok:
				bad.add("output seq %d: subject %q is not %s.<tenant>.<source>", o.Seq, o.Subject, OutputPrefix)
			case o.IdemKey != t+":"+s+":"+o.Key:
				bad.add("output seq %d on %s: Idempotency-Key %q is not <tenant>:<source>:<Dedupe-Key %q>", o.Seq, o.Subject, o.IdemKey, o.Key)
			}
			if o.MsgID == "" {
				bad.add("output seq %d (%s): no Nats-Msg-Id", o.Seq, o.IdemKey)
			}
			if o.Reason != "" {
				bad.add("output seq %d (%s): a unique event with Dedupe-Reason %q", o.Seq, o.IdemKey, o.Reason)
			}
			if bodies, ok := keyBodies[o.IdemKey]; ok && !bodies[o.Body] {
				wrongBody.add("output seq %d (%s): body (%d bytes) is none of the bodies published with that key", o.Seq, o.IdemKey, o.Size)
			}
		case "unkeyed":
			r.Unkeyed++
			r.UnkeyedReasons[o.Reason]++
			rest, ok := strings.CutPrefix(o.IdemKey, "msg/"+InputStream+"/")
			seqStr, stampStr, ok2 := strings.Cut(rest, "/")
			inSeq, err := strconv.ParseUint(seqStr, 10, 64)
			_, err2 := strconv.ParseInt(stampStr, 10, 64)
			if !ok || !ok2 || err != nil || err2 != nil {
				bad.add("unkeyed output seq %d: Idempotency-Key %q is not msg/%s/<seq>/<stamp>", o.Seq, o.IdemKey, InputStream)
				continue
			}
			seenUnkeyed[inSeq] = append(seenUnkeyed[inSeq], o.Seq)
			if o.MsgID == "" {
				bad.add("unkeyed output seq %d (%s): no Nats-Msg-Id", o.Seq, o.IdemKey)
			}
			e := unkeyedBySeq[inSeq]
			if e == nil {
				continue // reported below as unexpected
			}
			if o.Reason != e.Reason {
				bad.add("unkeyed output %s: Dedupe-Reason %q, want %q (input %s)", o.IdemKey, o.Reason, e.Reason, e.Subject)
			}
			if want := OutputPrefix + strings.TrimPrefix(e.Subject, InputPrefix); strings.HasPrefix(e.Subject, InputPrefix+".") && o.Subject != want {
				bad.add("unkeyed output %s: subject %q, want %s", o.IdemKey, o.Subject, want)
			}
			if o.Body != e.Body {
				wrongBody.add("unkeyed output %s: body (%d bytes) differs from the envelope's", o.IdemKey, o.Size)
			}
		default:
			bad.add("output seq %d (%s): Dedupe-Status %q (want unique or unkeyed)", o.Seq, o.Subject, o.Status)
		}
	}
	bad.close()
	wrongBody.close()

	twice := capped{r: r, what: "keys republished more than once"}
	unexpected := capped{r: r, what: "unexpected keys"}
	for _, k := range sortedKeys(seenKey) {
		seqs := seenKey[k]
		if len(seqs) > 1 {
			twice.add("Idempotency-Key %q appears %d times in %s (seqs %v)", k, len(seqs), OutputStream, seqs)
		}
		if keyBodies[k] == nil {
			unexpected.add("unexpected Idempotency-Key %q in %s (seq %v): no envelope has it", k, OutputStream, seqs)
		}
	}
	twice.close()
	unexpected.close()
	missing := capped{r: r, what: "keys never republished"}
	for _, k := range sortedKeys(keyBodies) {
		if _, ok := seenKey[k]; !ok {
			missing.add("missing Idempotency-Key %q: expected once in %s, never seen", k, OutputStream)
		}
	}
	missing.close()

	utwice := capped{r: r, what: "unkeyed envelopes republished more than once"}
	uunexpected := capped{r: r, what: "unexpected unkeyed outputs"}
	for _, seq := range sortedKeys(seenUnkeyed) {
		outs := seenUnkeyed[seq]
		if len(outs) > 1 {
			utwice.add("unkeyed envelope msg/%s/%d appears %d times in %s (seqs %v)", InputStream, seq, len(outs), OutputStream, outs)
		}
		if unkeyedBySeq[seq] == nil {
			uunexpected.add("unexpected unkeyed output msg/%s/%d (%s seqs %v): that envelope was not expected unkeyed", InputStream, seq, OutputStream, outs)
		}
	}
	utwice.close()
	uunexpected.close()
	umissing := capped{r: r, what: "unkeyed envelopes never republished"}
	for _, seq := range sortedKeys(unkeyedBySeq) {
		if _, ok := seenUnkeyed[seq]; !ok {
			e := unkeyedBySeq[seq]
			umissing.add("missing unkeyed output msg/%s/%d (%s, reason %s)", InputStream, seq, e.Subject, e.Reason)
		}
	}
	umissing.close()

	// DEDUPE_DLQ.
	dlqGot := map[string]int{}
	dbad := capped{r: r, what: "malformed dead letters"}
	for _, d := range deadLetters {
		r.DeadLettered++
		reason, ok := strings.CutPrefix(d.Subject, DLQPrefix+".")
		if !ok || reason == "" || strings.Contains(reason, ".") {
			dbad.add("dead letter seq %d: subject %q is not %s.<reason>", d.Seq, d.Subject, DLQPrefix)
		}
		r.DeadLetterReasons[reason]++
		if strings.TrimSpace(d.Err) == "" {
			dbad.add("dead letter seq %d (%s): no Dedupe-Error", d.Seq, d.In)
		}
		dlqGot[d.In]++
	}
	dbad.close()
	dmis := capped{r: r, what: "dead-letter mismatches"}
	for _, s := range sortedKeys(union(dlqWant, dlqGot)) {
		if w, g := dlqWant[s], dlqGot[s]; w != g {
			dmis.add("dead letters with Dedupe-Subject %q: %d, want %d", s, g, w)
		}
	}
	dmis.close()

	// The equation.
	r.Duplicate = r.Published - r.Unique - r.Unkeyed - r.DeadLettered
	if r.Duplicate < 0 {
		r.problem("duplicates = published %d − unique %d − unkeyed %d − dead-lettered %d = %d < 0: more outputs than envelopes",
			r.Published, r.Unique, r.Unkeyed, r.DeadLettered, r.Duplicate)
	} else if r.Duplicate != r.WantDuplicate {
		r.problem("duplicates %d, want %d (keyed envelopes %d − distinct keys %d)", r.Duplicate, r.WantDuplicate, keyed, len(keyBodies))
	}
	for _, c := range []struct {
		what      string
		got, want int
	}{{"unique", r.Unique, r.WantUnique}, {"unkeyed", r.Unkeyed, r.WantUnkeyed}, {"dead-lettered", r.DeadLettered, r.WantDeadLettered}} {
		if c.got != c.want {
			r.problem("%s %d, want %d", c.what, c.got, c.want)
		}
	}
	return r
}

func sortedKeys[K string | uint64, V any](m map[K]V) []K {
	ks := make([]K, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i] < ks[j] })
	return ks
}

func union(a, b map[string]int) map[string]int {
	u := make(map[string]int, len(a)+len(b))
	for k := range a {
		u[k] = 1
	}
	for k := range b {
		u[k] = 1
	}
	return u
}
