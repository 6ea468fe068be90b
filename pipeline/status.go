package pipeline

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// statusLoop refreshes the consumer's pending count and the window's health every StatusInterval.
func (p *Pipeline) statusLoop(ctx context.Context) {
	t := time.NewTicker(p.cfg.StatusInterval)
	defer t.Stop()
	for {
		p.refreshStatus(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (p *Pipeline) refreshStatus(ctx context.Context) {
	timeout := min(max(p.cfg.StatusInterval, time.Second), 5*time.Second)
	cctx, cancel := context.WithTimeout(ctx, timeout)
	c, err := p.js.Consumer(cctx, p.cfg.InputStream, p.cfg.Consumer)
	cancel()
	if ctx.Err() != nil {
		return
	}
	if err != nil {
		p.consumerErr.Store(&err)
	} else {
		p.consumerErr.Store(nil)
		info := c.CachedInfo()
		p.m.consumerPending.Set(float64(info.NumPending))
		if p.bound.Load() && info.Created.UnixNano() != p.consumerCreated.Load() {
			p.rebind.Store(true) // deleted and created again since it was bound
		}
	}
	p.refreshStreams(ctx)
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if err := p.cfg.Window.Ping(wctx); err != nil {
		if ctx.Err() != nil {
			return
		}
		if p.windowErr.Swap(&err) == nil {
			p.log.Warn("pipeline: window ping failed", "err", err)
		}
	} else {
		p.windowUp()
	}
	p.updateReady()
}

// refreshStreams reads the three streams' state for the size gauges, and the output stream's limits: its maximum
// message size (checked before a claim) and its duplicate window (the hold bound derives from it).
func (p *Pipeline) refreshStreams(ctx context.Context) {
	for _, name := range []string{p.cfg.InputStream, p.cfg.OutputStream, p.cfg.DLQStream} {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := p.js.Stream(cctx, name)
		cancel()
		if err != nil {
			continue
		}
		info := st.CachedInfo()
		p.m.streamMessages.WithLabelValues(name).Set(float64(info.State.Msgs))
		p.m.streamBytes.WithLabelValues(name).Set(float64(info.State.Bytes))
		if name == p.cfg.InputStream {
			p.inputKeeps.Store(info.Config.Retention != jetstream.WorkQueuePolicy)
		}
		if name == p.cfg.OutputStream {
			p.outMaxMsgSize.Store(int64(max(info.Config.MaxMsgSize, 0)))
			p.maxHold.Store(int64(p.holdBound(info.Config.Duplicates)))
			p.checkDupWindow(info.Config.Duplicates)
		}
	}
}

// checkDupWindow records the output stream's duplicate window as it is now (an operator may edit it at any time)
// and warns, once per change, when a redelivery after a lost ack (the ack wait) of a delivery held up to the hold
// bound would no longer be caught by it: such a republish then relies on the claim's record alone, and an unkeyed
// event is stored again.
func (p *Pipeline) checkDupWindow(dup time.Duration) {
	prev := time.Duration(p.outDupWindow.Swap(int64(dup)))
	p.m.dupWindow.Set(dup.Seconds())
	need := p.cfg.AckWait + time.Duration(p.maxHold.Load())
	short := dup < need
	if short {
		p.m.dupWindowShort.Set(1)
	} else {
		p.m.dupWindowShort.Set(0)
	}
	if dup == prev {
		return
	}
	if short {
		p.log.Warn("pipeline: the output stream's duplicate window is shorter than the ack wait plus the hold bound: "+
			"a republished unkeyed event may be stored twice; raise it (nats stream edit) or lower DEDUPE_ACK_WAIT/DEDUPE_MAX_HOLD",
			"stream", p.cfg.OutputStream, "duplicate_window", dup, "ack_wait", p.cfg.AckWait, "hold_bound", time.Duration(p.maxHold.Load()))
	} else if prev != 0 {
		p.log.Info("pipeline: the output stream's duplicate window changed", "stream", p.cfg.OutputStream, "duplicate_window", dup)
	}
}
