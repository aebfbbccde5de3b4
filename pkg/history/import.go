package history

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"

	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// Reasons an import is refused for, beside the turn event's own (turn.Reason*).
const (
	// ReasonSeqOrder: a line's seq is not above the line before it.
	ReasonSeqOrder turn.Reason = "seq_order"
	// ReasonDuplicateEvent: two lines carry the same event_id.
	ReasonDuplicateEvent turn.Reason = "duplicate_event_id"
	// ReasonNoEvents: the body holds no event.
	ReasonNoEvents turn.Reason = "no_events"
)

// Line is one event of an import, checked and ready to publish.
type Line struct {
	// Number is the event's line in the body, from 1.
	Number int
	Seq    int64
	// EventID is the event's id as published: the line's, or one made for
	// the target session when the line names another (ImportedEventID).
	EventID string
	// Messages is how many messages the event adds (its input messages and
	// its response).
	Messages int
	// Body is the event as published: the target session's, its tenant
	// left out (the subject names it).
	Body []byte
}

// LineError is a line an import refuses, the line numbered from 1 (0 for
// the body as a whole).
type LineError struct {
	Line int
	Err  *turn.InputError
}

func (e *LineError) Error() string {
	if e.Line == 0 {
		return e.Err.Detail
	}
	return fmt.Sprintf("line %d: %s", e.Line, e.Err.Detail)
}

// AsLineError reports whether err is a *LineError.
func AsLineError(err error) (*LineError, bool) {
	var le *LineError
	ok := errors.As(err, &le)
	return le, ok
}

// ReadOptions says what a body of events is checked against.
type ReadOptions struct {
	// Session is the session the events go to: each line's session_id is
	// replaced by it.
	Session string
	// Tenant is the key's: a line naming another tenant is refused.
	Tenant string
	// MaxEventBytes bounds one event (its line and the event as published).
	MaxEventBytes int
	// Check, when set, refuses an event as the target would (its limits,
	// its window): the refusal names the event's line.
	Check func(turn.Event) *turn.InputError
}

// Read reads a body of turn events, one JSON object a line (blank lines
// are skipped), and checks every one before any is used: each decodes as
// POST /v1/turns decodes it, the seqs go up, no event id comes twice. The
// events come back for Session: a line naming another session gets
// Session and an event id made for it (ImportedEventID), so the same
// history imported into two sessions of a tenant makes distinct events,
// and imported twice into one makes the same ones. The first bad line
// stops the read with a *LineError; an error of r (a body over its limit)
// comes back as it is.
func Read(r io.Reader, opts ReadOptions) ([]Line, error) {
	limit := opts.MaxEventBytes
	if limit <= 0 {
		limit = turn.DefaultMaxEventBytes
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), limit+2) // a line, its "\r\n"
	var out []Line
	seen := map[string]int{}
	n := 0
	for sc.Scan() {
		n++
		raw := bytes.TrimSpace(sc.Bytes())
		if len(raw) == 0 {
			continue
		}
		refuse := func(reason turn.Reason, format string, args ...any) error {
			return &LineError{Line: n, Err: turn.Refuse(reason, format, args...)}
		}
		ev, err := turn.Decode(raw, turn.DecodeOptions{MaxBytes: limit, Tenant: opts.Tenant})
		if err != nil {
			ie, ok := turn.AsInputError(err)
			if !ok {
				ie = turn.Refuse(turn.ReasonBadJSON, "%v", err)
			}
			return nil, &LineError{Line: n, Err: ie}
		}
		if opts.Check != nil {
			if ie := opts.Check(ev); ie != nil {
				return nil, &LineError{Line: n, Err: ie}
			}
		}
		if len(out) > 0 && ev.Seq <= out[len(out)-1].Seq {
			return nil, refuse(ReasonSeqOrder, "seq %d follows seq %d of line %d: an import's events go in increasing seq", ev.Seq, out[len(out)-1].Seq, out[len(out)-1].Number)
		}
		if ev.SessionID != opts.Session {
			ev.EventID = ImportedEventID(opts.Session, ev.EventID)
			ev.SessionID = opts.Session
		}
		if first, ok := seen[ev.EventID]; ok {
			return nil, refuse(ReasonDuplicateEvent, "event_id %s is line %d's too", ev.EventID, first)
		}
		seen[ev.EventID] = n
		ev.TenantID = ""
		body, err := turn.Marshal(ev)
		if err != nil {
			return nil, fmt.Errorf("history.Read: line %d: %w", n, err)
		}
		if len(body) > limit {
			return nil, refuse(turn.ReasonTooLarge, "the event is %d bytes for this session, more than the limit of %d", len(body), limit)
		}
		out = append(out, Line{Number: n, Seq: ev.Seq, EventID: ev.EventID, Messages: len(ev.InputMessages) + boolInt(ev.Response != nil), Body: body})
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, &LineError{Line: n + 1, Err: turn.Refuse(turn.ReasonTooLarge, "longer than the limit of %d bytes an event", limit)}
		}
		return nil, err
	}
	if len(out) == 0 {
		return nil, &LineError{Err: turn.Refuse(ReasonNoEvents, "the body holds no turn event: send one JSON object a line, as an export writes them")}
	}
	return out, nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// ImportedEventID is the event id an event of another session gets when
// it is imported into session: "<session>:<event id>" (a session id holds
// no ':', so it reads back unambiguously), or, when that is longer than an
// event id may be, "<session>:" and a hash of the event id.
func ImportedEventID(session, eventID string) string {
	id := session + ":" + eventID
	if len(id) <= turn.MaxIDLen {
		return id
	}
	sum := sha256.Sum256([]byte(eventID))
	id = session + ":" + hex.EncodeToString(sum[:16])
	if len(id) <= turn.MaxIDLen {
		return id
	}
	sum = sha256.Sum256([]byte(session + "\x00" + eventID))
	return "imported-" + hex.EncodeToString(sum[:])
}
