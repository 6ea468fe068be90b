package kvwindow

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// MaxList is the most claims one List call returns.
const MaxList = 10_000

// list returns up to limit live claims of the scope held by this bucket, in revision order from revision from (0:
// the first), and the revision where the next page starts (0: none). Keys longer than MaxRawKey are listed with
// the exact key their claim value records.
func (w *shard) list(ctx context.Context, tenant, source string, from uint64, limit int) (entries []Entry, next uint64, err error) {
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
