package pipeline

import "github.com/nats-io/nats.go/jetstream"

// CheckConsumer is checkConsumer for cfg (defaults applied): the messages of its warnings about the existing
// consumer got, or why it cannot serve the pipeline.
func CheckConsumer(cfg Config, got jetstream.ConsumerConfig) ([]string, error) {
	warns, err := checkConsumer(cfg.WithDefaults(), got)
	msgs := make([]string, len(warns))
	for i, w := range warns {
		msgs[i] = w.msg
	}
	return msgs, err
}
