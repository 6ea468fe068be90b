package kvwindow_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/dedupeworker/dedupeworker/kvwindow"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func ExampleNew() {
	nc, err := nats.Connect(nats.DefaultURL)
	if err != nil {
		log.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()

	// Bucket "dedupe-window", R1, file storage, created when missing.
	w, err := kvwindow.New(ctx, js, kvwindow.DefaultConfig())
	if err != nil {
		log.Fatal(err)
	}
	out, err := w.Claim(ctx, kvwindow.Claim{
		Tenant: "acme", Source: "stripe", Key: "evt_1NqZ", TTL: 24 * time.Hour,
		// The envelope's sequence and timestamp in the input stream, and which delivery of it this is.
		Claimant: kvwindow.Claimant{Seq: 1042, Stamp: 1_717_171_717_000_000_000},
		Delivery: kvwindow.Delivery{Consumer: 1_717_000_000_000_000_000, Count: 1},
	}, kvwindow.Known{})
	switch {
	case errors.Is(err, kvwindow.ErrUnavailable):
		// Could not decide: nak the envelope and retry later. Never treat it as "not a duplicate".
	case err != nil:
		log.Fatal(err) // invalid claim
	case out.Status == kvwindow.Won, out.Status == kvwindow.Owned:
		fmt.Println("publish, Nats-Msg-Id revision", out.Revision)
	case out.Status == kvwindow.Duplicate:
		fmt.Println("drop: duplicate of revision", out.Revision)
	case out.Status == kvwindow.Stale:
		// A later delivery of this envelope holds the claim and publishes; leave this delivery alone.
	}
}
