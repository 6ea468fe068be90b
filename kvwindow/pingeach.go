package kvwindow

import (
	"context"
	"errors"
	"slices"
	"sync"

	"github.com/nats-io/nats.go/jetstream"
)

// BucketPing is what PingEach found of one bucket: its stream's info as the read returned it (nil when the read
// failed, ReadErr saying why), and what Ping makes of it (Err).
type BucketPing struct {
	Bucket  string
	Info    *jetstream.StreamInfo
	ReadErr error
	Err     error
}

// PingEach is Ping for a caller that also wants what the reads say of each bucket's stream (its leader, its
// replicas), in shard order, without reading it again.
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
	return out, pingVerdict(out)
}

// pingVerdict is what a Ping of buckets that answered each (in shard order) returns: the first lost bucket's error,
// else the first age limit's or discard policy's, else the first other failure. The order is that of what each
// takes to pass, so that the failure reported never hides a graver one: a lost bucket needs the operator and a
// restart, an age limit or a discard policy the operator's edit, and any other failure (a bucket not answering, a
// stream without a leader) passes by itself.
func pingVerdict(each []BucketPing) error {
	for _, grave := range []func(BucketPing) bool{
		func(b BucketPing) bool { return errors.Is(b.Err, ErrWindowLost) },
		func(b BucketPing) bool { return errors.Is(b.Err, ErrAgeLimit) || errors.Is(b.Err, ErrEvicting) },
		func(b BucketPing) bool { return b.Err != nil },
	} {
		if i := slices.IndexFunc(each, grave); i >= 0 {
			return each[i].Err
		}
	}
	return nil
}

// pingInfo is the shard's Ping with the stream info it read (nil when the read failed: readErr, its own error).
func (w *shard) pingInfo(ctx context.Context) (info *jetstream.StreamInfo, readErr, err error) {
	if err := w.closedErr(); err != nil {
		return nil, err, err
	}
	info, readErr = w.info(ctx)
	if readErr != nil {
		return nil, readErr, w.observe(nil, readErr)
	}
	if err := w.observe(info, nil); err != nil {
		return info, nil, err
	}
	if err := w.evictErr(); err != nil {
		return info, nil, err
	}
	return info, nil, w.agedOut()
}
