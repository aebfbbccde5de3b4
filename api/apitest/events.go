package apitest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/mnemos-ai/mnemos/api"
	"github.com/mnemos-ai/mnemos/pkg/bus"
	"github.com/mnemos-ai/mnemos/pkg/events"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// kindSchemas names the schema of each event kind; a dream's kinds
// ("dream.<state>") share one.
var kindSchemas = map[string]string{
	bus.KindTurnCompleted:        turn.SchemaV1,
	bus.KindTurnAccounted:        events.SchemaTurnAccounted,
	bus.KindContextThreshold:     events.SchemaContextThreshold,
	bus.KindCompactRequested:     events.SchemaCompactRequested,
	bus.KindCompactCompleted:     events.SchemaCompactCompleted,
	bus.KindCompactFailed:        events.SchemaCompactFailed,
	bus.KindCircuitOpened:        events.SchemaCircuitOpened,
	bus.KindSessionMemoryUpdated: events.SchemaSessionMemoryUpdated,
	bus.KindMemorySaved:          events.SchemaMemorySaved,
}

// SchemaOf names the schema of an event kind's payload ("" for a kind
// without one).
func SchemaOf(kind string) string {
	if s, ok := kindSchemas[kind]; ok {
		return s
	}
	if strings.HasPrefix(kind, "dream.") {
		return events.SchemaDream
	}
	return ""
}

// eventSchemas are the compiled schemas by schema name: every file of
// api/events and the turn event's, built once.
var eventSchemas = sync.OnceValues(func() (map[string]*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	ids := map[string]string{} // schema name → $id
	add := func(file string, raw []byte) error {
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		obj, _ := doc.(map[string]any)
		id, _ := obj["$id"].(string)
		if id == "" {
			return fmt.Errorf("%s: no $id", file)
		}
		if err := c.AddResource(id, doc); err != nil {
			return fmt.Errorf("%s: %w", file, err)
		}
		ids[strings.TrimSuffix(file, ".schema.json")] = id
		return nil
	}
	for file, raw := range api.EventSchemas() {
		if err := add(file, raw); err != nil {
			return nil, err
		}
	}
	if err := add(api.EventSchemaFile(turn.SchemaV1), turn.SchemaJSON); err != nil {
		return nil, err
	}
	out := map[string]*jsonschema.Schema{}
	for name, id := range ids {
		s, err := c.Compile(id)
		if err != nil {
			return nil, fmt.Errorf("compile %s: %w", name, err)
		}
		out[name] = s
	}
	return out, nil
})

// CheckEvent validates the payload of an event of the given kind against
// the kind's JSON Schema; the payload's "schema" must name it.
func CheckEvent(kind string, data []byte) error {
	name := SchemaOf(kind)
	if name == "" {
		return fmt.Errorf("%s: no schema for this kind of event", kind)
	}
	schemas, err := eventSchemas()
	if err != nil {
		return err
	}
	s := schemas[name]
	if s == nil {
		return fmt.Errorf("%s: no file %s", kind, api.EventSchemaFile(name))
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("%s: %w", kind, err)
	}
	if err := s.Validate(inst); err != nil {
		return fmt.Errorf("%s does not match %s: %w", kind, api.EventSchemaFile(name), err)
	}
	if strings.HasPrefix(kind, "dream.") {
		var d struct {
			State string `json:"state"`
		}
		if err := json.Unmarshal(data, &d); err != nil || "dream."+d.State != kind {
			return fmt.Errorf("%s: the payload's state %q is not the subject's", kind, d.State)
		}
	}
	return nil
}

// CheckBusEvents fails t, when it ends, on any event published on b's
// namespace from now on whose payload does not match its kind's schema:
// the events Mnemos publishes (the EVENTS stream's), or only those of the
// kinds named, when a test publishes other kinds by hand (bad ones on
// purpose, say). Turn events are the backends', checked at ingest, and
// left out. Call it right after making the bus: its check runs after the
// services started later have stopped.
func CheckBusEvents(t testing.TB, b *bus.Bus, kinds ...string) {
	t.Helper()
	var (
		mu   sync.Mutex
		errs []error
		n    int
	)
	check := func(m *nats.Msg) {
		kind, _, _, err := b.ParseSubject(m.Subject)
		if err != nil || kind == bus.KindTurnCompleted || SchemaOf(kind) == "" {
			return // not an event (a dead letter, the JetStream API)
		}
		if len(kinds) > 0 && !slices.Contains(kinds, kind) {
			return
		}
		err = CheckEvent(kind, m.Data)
		mu.Lock()
		defer mu.Unlock()
		n++
		if err != nil {
			errs = append(errs, fmt.Errorf("on %s: %w\n%s", m.Subject, err, m.Data))
		}
	}
	sub, err := b.Conn().Subscribe(b.Prefix(">"), check)
	if err != nil {
		t.Fatalf("apitest: subscribe to the events: %v", err)
	}
	t.Cleanup(func() {
		_ = b.Conn().Flush() // what was published before is delivered
		if err := sub.Drain(); err != nil {
			t.Errorf("apitest: drain the events: %v", err)
		}
		deadline := time.Now().Add(10 * time.Second)
		for sub.IsValid() && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		mu.Lock()
		defer mu.Unlock()
		if err := errors.Join(errs...); err != nil {
			t.Errorf("apitest: events that do not match their schemas (api/events):\n%v", err)
			return
		}
		t.Logf("apitest: %d events matched their schemas", n)
	})
}
