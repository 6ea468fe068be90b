package jsapi

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Request sends req, as JSON, to the JetStream API subject subject (Prefix included) and decodes the answer into
// resp: for the few requests the jetstream package has no call for (a purge that reports what it removed, a leader
// step-down to a preferred server). The server's refusal is its *jetstream.APIError; no answer is the
// connection's error (nats.ErrNoResponders, a timeout).
func Request(ctx context.Context, nc *nats.Conn, subject string, req, resp any) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	msg, err := nc.RequestWithContext(ctx, subject, body)
	if err != nil {
		return err
	}
	var refusal struct {
		Error *jetstream.APIError `json:"error"`
	}
	if err := json.Unmarshal(msg.Data, &refusal); err != nil {
		return fmt.Errorf("answer of %s: %w", subject, err)
	}
	if refusal.Error != nil {
		return refusal.Error
	}
	if err := json.Unmarshal(msg.Data, resp); err != nil {
		return fmt.Errorf("answer of %s: %w", subject, err)
	}
	return nil
}
