package kvwindow

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// MaxList is the most claims one List call returns.
const MaxList = 10_000

// List returns up to limit live claims of tenant (and of source; "" = every source of the tenant), in revision
// order, starting at revision from (0: the first). next is the revision to pass as from for the next page, 0 when
// there is none. It reads the bucket's stream with a short-lived ordered consumer filtered on the scope, so its cost
// is the scope's claims (and expiry markers) from from on, never the whole bucket; a claim taken over or released
// meanwhile may be missed or listed at its new revision. Keys longer than MaxRawKey are listed with the exact key
// their claim value records. Errors wrap ErrUnavailable (or ErrInvalid for a bad scope or limit).
func (w *Window) List(ctx context.Context, tenant, source string, from uint64, limit int) (entries []Entry, next uint64, err error) {
	if err := validateScope(tenant, source, true); err != nil {
		return nil, 0, err
	}
	if limit < 1 || limit > MaxList {
		return nil, 0, fmt.Errorf("%w: limit: must be between 1 and %d, got %d", ErrInvalid, MaxList, limit)
	}
	filter := w.prefix + tenant + ".>"
	if source != "" {
		filter = w.prefix + tenant + "." + source + ".>"
	}
	ctx, cancel := context.WithTimeout(ctx, max(w.cfg.Timeout, 10*time.Second))
	defer cancel()
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}, DeliverPolicy: jetstream.DeliverAllPolicy}
	if from > 0 {
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, from
	}
	cons, err := w.leader.OrderedConsumer(ctx, cfg)
	if err != nil {
		return nil, 0, w.unavailable("list", strings.TrimSuffix(filter, ".>"), err)
	}
	for {
		batch, err := cons.FetchNoWait(min(limit-len(entries)+1, 256))
		if err != nil {
			return nil, 0, w.unavailable("list", strings.TrimSuffix(filter, ".>"), err)
		}
		got := 0
		last := false
		for m := range batch.Messages() {
			got++
			meta, err := m.Metadata()
			if err != nil {
				continue
			}
			if len(entries) == limit {
				next = meta.Sequence.Stream
				return entries, next, nil
			}
			last = meta.NumPending == 0
			rm := &jetstream.RawStreamMsg{Header: m.Headers()}
			if isTombstone(rm) {
				continue
			}
			e := entryOf(m.Data(), m.Headers(), meta.Sequence.Stream, meta.Timestamp)
			e.KVKey = strings.TrimPrefix(m.Subject(), w.prefix)
			if parts := strings.SplitN(e.KVKey, ".", 3); len(parts) == 3 {
				e.Tenant, e.Source = parts[0], parts[1]
			}
			entries = append(entries, e)
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return nil, 0, w.unavailable("list", strings.TrimSuffix(filter, ".>"), err)
		}
		if got == 0 || last {
			return entries, 0, nil
		}
	}
}
