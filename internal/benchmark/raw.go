package benchmark

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/store"
)

// RawJetStream publishes n messages of size bytes from publishers goroutines
// to a stream of their own (file storage, like Mnemos's) while a consumer
// acknowledges them, and returns messages a second, publish to last ack.
// name keeps concurrent or repeated runs apart.
func RawJetStream(ctx context.Context, b *bus.Bus, name string, n, size, publishers int) (float64, error) {
	js := b.JetStream()
	stream := b.StreamName("RAWBENCH_" + strings.ToUpper(name))
	subject := b.Prefix("rawbench." + name)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: stream, Subjects: []string{subject}, Storage: jetstream.FileStorage}); err != nil {
		return 0, fmt.Errorf("benchmark: raw stream: %w", err)
	}
	defer js.DeleteStream(context.WithoutCancel(ctx), stream) //nolint:errcheck // best effort: the stream is the benchmark's own
	cons, err := js.CreateOrUpdateConsumer(ctx, stream, jetstream.ConsumerConfig{Durable: "raw", AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		return 0, fmt.Errorf("benchmark: raw consumer: %w", err)
	}
	data := []byte(strings.Repeat("x", size))
	var got atomic.Int64
	var ackErr atomic.Value
	done := make(chan struct{})
	start := time.Now()
	cc, err := cons.Consume(func(m jetstream.Msg) {
		if err := m.Ack(); err != nil {
			ackErr.Store(err)
		}
		if got.Add(1) == int64(n) {
			close(done)
		}
	})
	if err != nil {
		return 0, fmt.Errorf("benchmark: raw consume: %w", err)
	}
	defer cc.Stop()
	if err := parallel(n, publishers, func(int) error {
		_, err := js.Publish(ctx, subject, data)
		return err
	}); err != nil {
		return 0, fmt.Errorf("benchmark: raw publish: %w", err)
	}
	select {
	case <-done:
	case <-ctx.Done():
		return 0, ctx.Err()
	case <-time.After(2 * time.Minute):
		return 0, fmt.Errorf("benchmark: raw consumer got %d of %d", got.Load(), n)
	}
	if err, ok := ackErr.Load().(error); ok {
		return 0, fmt.Errorf("benchmark: raw ack: %w", err)
	}
	return float64(n) / time.Since(start).Seconds(), nil
}

// RawPostgres inserts n rows of size bytes, one committed transaction each,
// from workers goroutines, into a table of its own, and returns rows a
// second. The statements are the baseline's own, deliberately outside the
// store's queries. The owner (who may create tables) makes the table and
// lets the services' role insert; the inserts go through st's pool, as the
// services' do. The table is dropped afterwards.
func RawPostgres(ctx context.Context, st *store.Store, owner *pgxpool.Pool, n, size, workers int) (float64, error) {
	if _, err := owner.Exec(ctx, "CREATE TABLE IF NOT EXISTS mnemos_bench_raw (id bigserial PRIMARY KEY, payload bytea NOT NULL); "+
		"GRANT INSERT ON mnemos_bench_raw TO "+store.AppRole+"; GRANT USAGE ON SEQUENCE mnemos_bench_raw_id_seq TO "+store.AppRole); err != nil {
		return 0, fmt.Errorf("benchmark: raw table: %w", err)
	}
	defer owner.Exec(context.WithoutCancel(ctx), "DROP TABLE IF EXISTS mnemos_bench_raw") //nolint:errcheck // best effort: the table is the benchmark's own
	pool := st.Pool()
	data := []byte(strings.Repeat("x", size))
	start := time.Now()
	if err := parallel(n, workers, func(int) error {
		_, err := pool.Exec(ctx, "INSERT INTO mnemos_bench_raw (payload) VALUES ($1)", data)
		return err
	}); err != nil {
		return 0, fmt.Errorf("benchmark: raw insert: %w", err)
	}
	return float64(n) / time.Since(start).Seconds(), nil
}
