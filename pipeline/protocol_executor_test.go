package pipeline_test

import (
	"errors"
	"testing"
	"time"

	"github.com/dedupeworker/dedupeworker/internal/natstest"
	"github.com/dedupeworker/dedupeworker/pipeline"
	"github.com/dedupeworker/dedupeworker/pipeline/protocol"
)

// TestWorkerExecutesAlteredPlans: the worker carries out whatever plan its protocol returns, so a wrapper that
// alters plans changes what happens (here: every delivery is handed back instead of published), and a protocol
// that never stops makes the worker hand the envelope back rather than loop.
func TestWorkerExecutesAlteredPlans(t *testing.T) {
	e := newEnv(t)
	cfg := e.config(memWindow())
	handBack := func(f protocol.Facts) protocol.Plan {
		p := protocol.Decide(f)
		if p.Do == protocol.Publish {
			return protocol.Plan{Do: protocol.Nak, Nak: protocol.NakHeld}
		}
		return p
	}
	r := e.startWith(cfg, func(p *pipeline.Pipeline) { pipeline.SetDecide(p, handBack) })
	e.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "altered"), []byte("x"))
	natstest.Eventually(t, 10*time.Second, func() error {
		if e.metric("dedupeworker_naks_total", "reason", pipeline.NakHeld) < 1 {
			return errors.New("not handed back yet")
		}
		return nil
	})
	if n := e.count(pipeline.DefaultOutputStream); n != 0 {
		t.Errorf("output holds %d events under a protocol that never publishes", n)
	}
	r.stop(t)

	e2 := newEnv(t)
	endless := func(f protocol.Facts) protocol.Plan { return protocol.Plan{Do: protocol.Build, Keyed: true} }
	e2.startWith(e2.config(memWindow()), func(p *pipeline.Pipeline) { pipeline.SetDecide(p, endless) })
	e2.publish("ingest.t1.gh", hdr("X-GitHub-Delivery", "endless"), []byte("x"))
	natstest.Eventually(t, 10*time.Second, func() error {
		if e2.metric("dedupeworker_naks_total", "reason", pipeline.NakWindow) < 1 {
			return errors.New("not handed back yet")
		}
		return nil
	})
}
