package kvwindow

import (
	"context"
	"errors"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// BucketPing is what PingEach found of one bucket: its stream's info as the read returned it (nil when the read
// failed, ReadErr saying why), and what Ping makes of it (Err: nil, or wrapping ErrWindowLost or ErrUnavailable).
type BucketPing struct {
	Bucket  string
	Info    *jetstream.StreamInfo
	ReadErr error
	Err     error
}

// PingEach is Ping for a caller that also wants what the reads say of each bucket's stream (its leader, its
// replicas), without reading it again: one stream info request per bucket, all at once, each bounded by
// Config.Timeout. It returns each bucket's read, in shard order, and what Ping would return after them.
func (w *Window) PingEach(ctx context.Context) ([]BucketPing, error) {
	out := make([]BucketPing, len(w.shards))
	var wg sync.WaitGroup
	for i, s := range w.shards {
		wg.Go(func() {
			out[i].Bucket = s.cfg.Bucket
			out[i].Info, out[i].ReadErr, out[i].Err = s.pingInfo(ctx)
		})
	}
	wg.Wait()
	errs := make([]error, len(out))
	for i, b := range out {
		errs[i] = b.Err
	}
	return out, pingVerdict(errs)
}

// pingVerdict is what a Ping of the buckets that answered errs (in shard order) returns: the first failure other
// than a lost bucket, else the first lost bucket's error, else nil.
func pingVerdict(errs []error) error {
	var lost error
	for _, err := range errs {
		if err != nil && !errors.Is(err, ErrWindowLost) {
			return err
		}
		if lost == nil {
			lost = err
		}
	}
	return lost
}

// pingInfo is the shard's Ping with the stream info it read (nil when the read failed: readErr, its own error).
func (w *shard) pingInfo(ctx context.Context) (info *jetstream.StreamInfo, readErr, err error) {
	if w.closed != nil && w.closed.Load() {
		err = w.usable()
		return nil, err, err
	}
	ctx, cancel := w.opCtx(ctx)
	defer cancel()
	st, readErr := w.js.Stream(ctx, w.stream)
	if readErr != nil {
		return nil, readErr, w.observe(nil, readErr)
	}
	info = st.CachedInfo()
	if err := w.observe(info, nil); err != nil {
		return info, nil, err
	}
	return info, nil, w.agedOut()
}
