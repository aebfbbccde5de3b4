package replay

import (
	"fmt"
	"strings"

	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// AddScope adds the memory scopes v names to scope: "kind=id", or several
// comma-separated ("project=repo-x,user=u-42"). Kinds are user, project,
// local and agent (memory.Kinds), ids as scope ids are; one kind names one
// id, so naming another id for a kind scope holds is an error.
func AddScope(scope map[string]string, v string) error {
	for _, part := range strings.Split(v, ",") {
		kind, id, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return fmt.Errorf("memory scope %q: write it as kind=id, e.g. project=repo-x (kinds: user, project, local, agent)", part)
		}
		sc, err := memory.NewScope(memory.Kind(kind), id)
		if err != nil {
			if e, ok := memory.AsError(err); ok {
				return fmt.Errorf("memory scope %q: %s", part, e.Detail)
			}
			return fmt.Errorf("memory scope %q: %w", part, err)
		}
		if had, ok := scope[kind]; ok && had != id {
			return fmt.Errorf("memory scope: %s is named twice (%s and %s); a session has one scope of each kind", kind, had, id)
		}
		scope[string(sc.Kind)] = sc.ID
	}
	return nil
}

// Session is one session a replay sends events to.
type Session struct {
	ID string
	// Events is how many turn events it is sent; Agent whose they are.
	Events int
	Agent  string
}

// Sessions lists the sessions of events in the order they first appear.
func Sessions(events []turn.Event) []Session {
	var out []Session
	at := map[string]int{}
	for i := range events {
		ev := &events[i]
		j, ok := at[ev.SessionID]
		if !ok {
			j = len(out)
			at[ev.SessionID] = j
			out = append(out, Session{ID: ev.SessionID, Agent: ev.Agent()})
		}
		out[j].Events++
	}
	return out
}
