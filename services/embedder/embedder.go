// Package embedder is the embedder target (see docs/memory.md,
// "Embeddings"): it keeps vectors of a tenant's messages and memories in
// Postgres, for search to rank by beside its lexical ranking. It runs only
// where a deployment configures an embeddings endpoint.
//
// It consumes events that exist already. On turn.accounted of a session
// that names a memory scope (search reaches no other) it embeds the
// session's messages from the one after the last it stored (a message
// without text is stored without a vector, so the next event resumes past
// it), so a message missed by one event, or stored before embeddings were
// configured, is caught up by the session's next turn. Memories have no
// event for every change (an agent's or the API's writes announce none):
// on memory.saved and dream.completed, and at most every MemoryEvery on the
// turns of a scope, it embeds the scope's live memories whose vector is
// missing or of an older revision. Everything it writes is idempotent: a
// redelivered event, or two replicas on one session, store each vector
// once.
package embedder

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/metric"

	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/defaults"
	"github.com/mnemos-ai/mnemos/pkg/embed"
	"github.com/mnemos-ai/mnemos/pkg/events"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/ttlcache"
)

// The durable consumers' names.
const (
	DurableTurns    = "embedder"
	DurableMemories = "embedder-memories"
	DurableDreams   = "embedder-dreams"
)

// Config of the embedder target.
type Config struct {
	// Workers handle events concurrently, per consumer.
	Workers int
	// MaxDeliver bounds redeliveries of an event that keeps failing.
	MaxDeliver int
	// Batch is the most messages or memories read and embedded at once.
	Batch int
	// MaxPerEvent bounds the messages one turn.accounted embeds; a session
	// further behind (embeddings configured on a long session) catches up
	// over its next turns.
	MaxPerEvent int
	// MemoryEvery is how often, at most, a scope's memories are checked on
	// its turns (memory.saved and dream.completed check at once).
	MemoryEvery time.Duration
	// Timeout bounds the handling of one event.
	Timeout time.Duration
}

// DefaultConfig holds the target's defaults.
func DefaultConfig() Config {
	return Config{Workers: 4, MaxDeliver: 8, Batch: 64, MaxPerEvent: 512, MemoryEvery: 30 * time.Second, Timeout: 2 * time.Minute}
}

// Service is the embedder.
type Service struct {
	cfg      Config
	store    *store.Store
	bus      *bus.Bus
	embedder embed.Embedder
	log      *slog.Logger
	metrics  serviceMetrics
	// checked remembers the scopes whose memories a turn checked lately.
	checked *ttlcache.Cache[struct{}]
	// busy runs one session's or scope's work at a time in this process:
	// two events of a session handled at once would embed the same
	// messages twice.
	busy keyLocks
}

// New builds the service; e embeds (its calls counted by the caller's
// wrapper, embed.Metered); meter may be nil.
func New(cfg Config, st *store.Store, b *bus.Bus, e embed.Embedder, log *slog.Logger, meter metric.Meter) (*Service, error) {
	if e == nil {
		return nil, errors.New("embedder.New: no embedder: configure MNEMOS_EMBED_BASE_URL")
	}
	m, err := newMetrics(defaults.Meter(meter))
	if err != nil {
		return nil, fmt.Errorf("embedder.New: %w", err)
	}
	defaults.Fill(&cfg, DefaultConfig())
	return &Service{cfg: cfg, store: st, bus: b, embedder: e, log: log, metrics: m,
		checked: ttlcache.New[struct{}](cfg.MemoryEvery, 100_000), busy: keyLocks{held: map[string]*keyLock{}}}, nil
}

// Run consumes turn.accounted, memory.saved and dream.completed until ctx
// ends, then drains the events in hand.
func (s *Service) Run(ctx context.Context) error {
	s.log.Info("embedder consuming", "subjects", []string{bus.KindTurnAccounted + ".>", bus.KindMemorySaved + ".>", bus.KindDreamCompleted + ".>"},
		"workers", s.cfg.Workers, "model", s.embedder.Model())
	consumer := func(durable, filter string, h bus.Handler) bus.Consumer {
		return bus.Consumer{Spec: bus.ConsumerSpec{
			Stream: bus.StreamEvents, Durable: durable, FilterSubject: filter,
			Workers: s.cfg.Workers, MaxDeliver: s.cfg.MaxDeliver, AckWait: s.cfg.Timeout + 30*time.Second,
			Classify: bus.TransientIf(store.IsUnavailable),
		}, Handler: h}
	}
	return s.bus.Serve(ctx, bus.Service{
		Name: "embedder",
		Consumers: []bus.Consumer{
			consumer(DurableTurns, bus.KindTurnAccounted+".>", events.Handler(s.bus, s.handleTurn)),
			consumer(DurableMemories, bus.KindMemorySaved+".>", events.Handler(s.bus, s.handleMemorySaved)),
			consumer(DurableDreams, bus.KindDreamCompleted+".>", events.Handler(s.bus, s.handleDream)),
		},
		Drain: s.cfg.Timeout + 10*time.Second,
	})
}

// handleTurn embeds a session's new messages, and checks its scopes'
// memories now and then. A session that names no scope is never searched,
// and is not embedded.
func (s *Service) handleTurn(ctx context.Context, _ bus.Message, ev events.TurnAccounted) error {
	tenant, session := ev.Address()
	scopes := memory.ScopesOf(ev.MemoryScope)
	if len(scopes) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	if err := s.EmbedSession(ctx, tenant, session); err != nil {
		return err
	}
	for _, scope := range scopes {
		key := tenant + "\x00" + scope.String()
		if _, err := s.checked.Get(ctx, key, func(ctx context.Context, _ string) (struct{}, error) {
			return struct{}{}, s.EmbedMemories(ctx, tenant, scope.String())
		}); err != nil {
			return err
		}
	}
	return nil
}

func (s *Service) handleMemorySaved(ctx context.Context, _ bus.Message, ev events.MemorySaved) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	return s.embedScope(ctx, ev.TenantID, ev.Scope)
}

func (s *Service) handleDream(ctx context.Context, _ bus.Message, ev events.Dream) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	return s.embedScope(ctx, ev.TenantID, ev.Scope)
}

// embedScope embeds a scope's memories now, for an event that names it; a
// scope that is not one is refused (dead-lettered).
func (s *Service) embedScope(ctx context.Context, tenant, raw string) error {
	scope, err := memory.ParseScope(raw)
	if err != nil {
		return bus.Permanent(err)
	}
	key := tenant + "\x00" + scope.String()
	s.checked.Forget(key)
	_, err = s.checked.Get(ctx, key, func(ctx context.Context, _ string) (struct{}, error) {
		return struct{}{}, s.EmbedMemories(ctx, tenant, scope.String())
	})
	return err
}

// EmbedSession embeds the session's messages from the one after the last
// stored, in batches, at most MaxPerEvent of them.
func (s *Service) EmbedSession(ctx context.Context, tenant, session string) error {
	defer s.busy.lock("session\x00" + tenant + "\x00" + session)()
	model := s.embedder.Model()
	for done := 0; done < s.cfg.MaxPerEvent; {
		var msgs []store.MessageContent
		err := s.store.InTx(ctx, tenant, func(tx *store.Tx) error {
			from, err := tx.MessageVectorResume(ctx, session, model)
			if err != nil {
				return err
			}
			msgs, err = tx.MessagesToEmbed(ctx, session, from, min(s.cfg.Batch, s.cfg.MaxPerEvent-done))
			return err
		})
		if err != nil {
			return fmt.Errorf("embedder: messages of %s/%s: %w", tenant, session, err)
		}
		if len(msgs) == 0 {
			return nil
		}
		vs, outcomes, err := s.messageVectors(ctx, session, msgs)
		if err != nil {
			return fmt.Errorf("embedder: messages of %s/%s: %w", tenant, session, err)
		}
		var wrote []int64
		if err := s.store.InTx(ctx, tenant, func(tx *store.Tx) error {
			var err error
			wrote, err = tx.PutMessageVectors(ctx, session, model, vs)
			return err
		}); err != nil {
			return fmt.Errorf("embedder: store vectors of %s/%s: %w", tenant, session, err)
		}
		for _, p := range wrote { // another replica may have written some
			s.metrics.message(ctx, outcomes[p])
		}
		done += len(msgs)
	}
	return nil
}

// messageVectors embeds the text of msgs: one vector per message, nil for a
// message without text or one the endpoint refused, and each message's
// outcome by position.
func (s *Service) messageVectors(ctx context.Context, session string, msgs []store.MessageContent) ([]store.MessageVector, map[int64]string, error) {
	out := make([]store.MessageVector, len(msgs))
	outcomes := make(map[int64]string, len(msgs))
	texts := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = store.MessageVector{SessionID: session, Position: m.Position}
		texts[i] = MessageText(m.Content)
	}
	vs, err := s.embedAll(ctx, texts)
	if err != nil {
		return nil, nil, err
	}
	for i, v := range vs {
		switch {
		case texts[i] == "":
			outcomes[out[i].Position] = OutcomeNoText
		case v == nil:
			outcomes[out[i].Position] = OutcomeRefused
		default:
			out[i].Vector = embed.Encode(v)
			outcomes[out[i].Position] = OutcomeEmbedded
		}
	}
	return out, outcomes, nil
}

// EmbedMemories embeds the scope's live memories whose vector is missing
// or stale, in batches, until none is left.
func (s *Service) EmbedMemories(ctx context.Context, tenant, scope string) error {
	defer s.busy.lock("scope\x00" + tenant + "\x00" + scope)()
	model := s.embedder.Model()
	for {
		var mems []store.MemoryToEmbed
		err := s.store.InTx(ctx, tenant, func(tx *store.Tx) error {
			var err error
			mems, err = tx.MemoriesToEmbed(ctx, scope, model, s.cfg.Batch)
			return err
		})
		if err != nil {
			return fmt.Errorf("embedder: memories of %s/%s: %w", tenant, scope, err)
		}
		if len(mems) == 0 {
			return nil
		}
		texts := make([]string, len(mems))
		for i, m := range mems {
			texts[i] = MemoryText(m.Name, m.Description, m.Body)
		}
		vs, err := s.embedAll(ctx, texts)
		if err != nil {
			return fmt.Errorf("embedder: memories of %s/%s: %w", tenant, scope, err)
		}
		out := make([]store.MemoryVector, len(mems))
		outcomes := make(map[string]string, len(mems))
		for i, v := range vs {
			out[i] = store.MemoryVector{Name: mems[i].Name, Revision: mems[i].Revision, Vector: []byte{}}
			outcomes[mems[i].Name] = OutcomeRefused
			// Refused, an empty vector marks the revision read, so the
			// memory is not asked for again until it changes.
			if v != nil {
				out[i].Vector, outcomes[mems[i].Name] = embed.Encode(v), OutcomeEmbedded
			}
		}
		var wrote []string
		if err := s.store.InTx(ctx, tenant, func(tx *store.Tx) error {
			var err error
			wrote, err = tx.PutMemoryVectors(ctx, scope, model, out)
			return err
		}); err != nil {
			return fmt.Errorf("embedder: store vectors of %s/%s: %w", tenant, scope, err)
		}
		for _, name := range wrote {
			s.metrics.memory(ctx, outcomes[name])
		}
	}
}

// embedAll embeds the texts that are not empty, in one call. When the
// endpoint refuses the call as a bad request (a text it will not take),
// each text is sent alone, and those it refuses get no vector: one bad
// text never holds up the others. Other failures are returned, to be
// retried.
func (s *Service) embedAll(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	var idx []int
	var batch []string
	for i, t := range texts {
		if t != "" {
			idx = append(idx, i)
			batch = append(batch, t)
		}
	}
	if len(batch) == 0 {
		return out, nil
	}
	vs, err := s.embedder.Embed(ctx, batch)
	if err == nil {
		for j, i := range idx {
			out[i] = vs[j]
		}
		return out, nil
	}
	if llm.KindOf(err) != llm.KindRequest {
		return nil, err
	}
	for _, i := range idx {
		v, err := s.embedder.Embed(ctx, texts[i:i+1])
		switch {
		case err == nil:
			out[i] = v[0]
		case llm.KindOf(err) == llm.KindRequest:
			s.log.Warn("embedder: the endpoint refused a text; it stays without a vector", "err", err, "bytes", len(texts[i]))
		default:
			return nil, err
		}
	}
	return out, nil
}

// keyLocks are mutexes by key, each kept while someone holds or waits for it.
type keyLocks struct {
	mu   sync.Mutex
	held map[string]*keyLock
}

type keyLock struct {
	sync.Mutex
	users int
}

// lock takes key's mutex and returns its release.
func (k *keyLocks) lock(key string) (unlock func()) {
	k.mu.Lock()
	l := k.held[key]
	if l == nil {
		l = &keyLock{}
		k.held[key] = l
	}
	l.users++
	k.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		k.mu.Lock()
		if l.users--; l.users == 0 {
			delete(k.held, key)
		}
		k.mu.Unlock()
	}
}

// MessageText is what is embedded of a stored message: its text blocks,
// one per line, as lexical search reads them (tool calls, tool results and
// thinking left out). Content that is not an array of blocks has none.
func MessageText(content []byte) string {
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(content, &blocks) != nil {
		return ""
	}
	var parts []string
	for _, b := range blocks {
		if b.Type == "text" && strings.TrimSpace(b.Text) != "" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// MemoryText is what is embedded of a memory: its name, description and
// body, one after the other.
func MemoryText(name, description, body string) string {
	return strings.TrimSpace(name + "\n" + description + "\n" + body)
}
