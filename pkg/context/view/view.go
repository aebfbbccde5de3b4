// Package view holds the shape of a session's context as the services see
// it: the messages that would be sent to the model next, in order, each with
// where it came from.
package view

import (
	"sync/atomic"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// Message is one message of a session's context.
type Message struct {
	// UUID is the stored message's id; "" for the messages a compaction made
	// (boundary, summary, restored attachments).
	UUID string
	// Position is the stored message's position in the session; -1 for the
	// messages a compaction made.
	Position int64
	// Round is the API round (the turn event's seq) the message came with; 0
	// for the messages a compaction made.
	Round   int64
	Role    string
	Content turn.Content
	// Tokens is the message's estimate (tokens.EstimateMessage) as rendered.
	Tokens int64
	// At is when the message was stored; zero for the messages a compaction made.
	At time.Time
	// Memo, when set, keeps how the message was last rendered, for the next
	// rendering of the same message (see Memo). Only messages shared
	// between reads (sessionctx.Cache) carry one.
	Memo *Memo
}

// Memo keeps a stored message's rendering between renders: its rendered
// content, token estimate and encoding, under the variant they were made
// for (what besides the message itself the rendering depended on). A
// stored message never changes, so a rendering stays right as long as its
// variant does. It is safe for concurrent use.
type Memo struct {
	p atomic.Pointer[Rendering]
}

// Rendering is what a Memo keeps; Data is nil until the message is encoded.
type Rendering struct {
	Variant uint64
	Content turn.Content
	Tokens  int64
	Data    []byte
}

// Get returns the rendering kept for variant.
func (m *Memo) Get(variant uint64) (Rendering, bool) {
	if m == nil {
		return Rendering{}, false
	}
	r := m.p.Load()
	if r == nil || r.Variant != variant {
		return Rendering{}, false
	}
	return *r, true
}

// Put keeps r, replacing what was kept.
func (m *Memo) Put(r Rendering) {
	if m != nil {
		m.p.Store(&r)
	}
}

// Stored reports whether m is a stored conversation message rather than one a compaction made.
func (m Message) Stored() bool { return m.Position >= 0 }

// Turn returns m as a turn message.
func (m Message) Turn() turn.Message {
	return turn.Message{UUID: m.UUID, Role: m.Role, Content: m.Content}
}

// Tokens is the sum of the messages' estimates.
func Tokens(msgs []Message) int64 {
	var n int64
	for _, m := range msgs {
		n += m.Tokens
	}
	return n
}
