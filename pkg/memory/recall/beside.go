package recall

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/mnemos-ai/mnemos/pkg/context/view"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/sessionstate"
	"github.com/mnemos-ai/mnemos/pkg/store"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

const (
	reminderOpen  = "<system-reminder>"
	reminderClose = "</system-reminder>"
)

// UserText is what the user wrote in m: the text of its text blocks,
// without the <system-reminder> spans clients add to a user's message.
// Assistant messages, tool results and the messages a compaction made have
// none.
func UserText(m view.Message) string {
	if m.Role != "user" || !m.Stored() {
		return ""
	}
	var parts []string
	for _, b := range m.Content {
		if b.Type != turn.BlockText {
			continue
		}
		if t := strings.TrimSpace(withoutReminders(b.Text)); t != "" {
			parts = append(parts, t)
		}
	}
	return strings.Join(parts, "\n")
}

func withoutReminders(s string) string {
	for {
		i := strings.Index(s, reminderOpen)
		if i < 0 {
			return s
		}
		j := strings.Index(s[i:], reminderClose)
		if j < 0 {
			return s[:i]
		}
		s = s[:i] + s[i+j+len(reminderClose):]
	}
}

// Prefetched reports whether m is a user message recall is prefetched for:
// one whose user text (UserText) has more than one word. Every context read
// asks it of every message, so it counts words as it goes, stopping at
// the second, instead of joining the text and splitting it.
func Prefetched(m view.Message) bool {
	if m.Role != "user" || !m.Stored() {
		return false
	}
	words := 0
	for i := range m.Content {
		b := &m.Content[i]
		if b.Type != turn.BlockText {
			continue
		}
		if words += fieldsUpTo(withoutReminders(b.Text), 2-words); words > 1 {
			return true
		}
	}
	return false
}

// fieldsUpTo counts the words of s as strings.Fields splits them, up to
// most.
func fieldsUpTo(s string, most int) int {
	n, inWord := 0, false
	for i := 0; i < len(s) && n < most; {
		r, size := rune(s[i]), 1
		if r >= utf8.RuneSelf {
			r, size = utf8.DecodeRuneInString(s[i:])
		}
		i += size
		switch space := unicode.IsSpace(r); {
		case space:
			inWord = false
		case !inWord:
			inWord = true
			n++
		}
	}
	return n
}

// Beside is what a session's context shows beside its user messages.
type Beside struct {
	// Blocks holds, by user message uuid, the reminders shown after the
	// message's own blocks.
	Blocks map[string]turn.Content
	// Waiting, when set, is the latest user message whose prefetch may
	// still be recorded until Until: the context must not be rendered
	// before it is decided (see Decided, Close).
	Waiting string
	Until   time.Time
}

// Attach decides what the context of sess shows beside the user messages
// of msgs (the messages it is about to render), in tx.
//
// What is shown beside a user message is decided once and never changes:
// the prefetch's reminders when the prefetch recorded them first, else
// nothing. A message is never rendered before that is decided, so a
// prefetch that ends after the message was shown cannot change bytes
// already sent (it is recorded as late). The latest prefetched user message
// is left undecided (Waiting) while its prefetch may still come — recall and
// the prefetch are on, the session reads a scope, and the message was
// stored less than set.PrefetchWait ago; every other undecided one is
// decided now, as showing nothing.
func Attach(ctx context.Context, tx *store.Tx, sess sessionstate.Session, msgs []view.Message, set Settings, now time.Time) (Beside, error) {
	return AttachKnown(ctx, tx, sess, msgs, set, now, nil)
}

// Known keeps decisions a caller has read before: a decision never changes
// (see Attach), so a message whose decision is known needs no read.
type Known interface {
	Decision(uuid string) (store.RecallPrefetch, bool)
	Remember(uuid string, d store.RecallPrefetch)
}

// AttachKnown is Attach reading only the decisions known (which may be
// nil) does not hold, and telling it those it read.
func AttachKnown(ctx context.Context, tx *store.Tx, sess sessionstate.Session, msgs []view.Message, set Settings, now time.Time, known Known) (Beside, error) {
	var users []view.Message
	for _, m := range msgs {
		if Prefetched(m) {
			users = append(users, m)
		}
	}
	out := Beside{Blocks: map[string]turn.Content{}}
	if len(users) == 0 {
		return out, nil
	}
	decided := map[string]store.RecallPrefetch{}
	var uuids []string
	for _, m := range users {
		if d, ok := decision(known, m.UUID); ok {
			decided[m.UUID] = d
			continue
		}
		uuids = append(uuids, m.UUID)
	}
	read, err := tx.RecallPrefetches(ctx, sess.SessionID, uuids)
	if err != nil {
		return Beside{}, fmt.Errorf("recall.Attach: %w", err)
	}
	maps.Copy(decided, read)
	expected := set.Enabled && set.Prefetch && len(memory.ScopesOf(sess.MemoryScope)) > 0
	var open []string
	for i, m := range users {
		if _, ok := decided[m.UUID]; ok {
			continue
		}
		if until := m.At.Add(set.PrefetchWait()); i == len(users)-1 && expected && now.Before(until) {
			out.Waiting, out.Until = m.UUID, until
			continue
		}
		open = append(open, m.UUID)
	}
	if len(open) > 0 {
		if err := tx.CloseRecallPrefetches(ctx, sess.SessionID, open); err != nil {
			return Beside{}, fmt.Errorf("recall.Attach: %w", err)
		}
		// A prefetch may have been recorded meanwhile: what is stored decides.
		closed, err := tx.RecallPrefetches(ctx, sess.SessionID, open)
		if err != nil {
			return Beside{}, fmt.Errorf("recall.Attach: %w", err)
		}
		maps.Copy(decided, closed)
		maps.Copy(read, closed)
	}
	if known != nil {
		for uuid, d := range read {
			known.Remember(uuid, d)
		}
	}
	show(out, decided)
	return out, nil
}

// AttachDecided is AttachKnown when known holds the decision on every
// user message of msgs; when it does not, it reports false, having read
// nothing, and the caller attaches in a transaction.
func AttachDecided(msgs []view.Message, known Known) (Beside, bool) {
	out := Beside{Blocks: map[string]turn.Content{}}
	decided := map[string]store.RecallPrefetch{}
	for _, m := range msgs {
		if !Prefetched(m) {
			continue
		}
		d, ok := decision(known, m.UUID)
		if !ok {
			return Beside{}, false
		}
		decided[m.UUID] = d
	}
	show(out, decided)
	return out, true
}

// show puts in out the reminders decided to be shown beside each message.
func show(out Beside, decided map[string]store.RecallPrefetch) {
	for uuid, d := range decided {
		if len(d.Blocks) == 0 {
			continue
		}
		content := make(turn.Content, len(d.Blocks))
		for i, text := range d.Blocks {
			content[i] = turn.Block{Type: turn.BlockText, Text: text}
		}
		out.Blocks[uuid] = content
	}
}

// Decided reports whether what is shown beside a user message is decided.
func Decided(ctx context.Context, tx *store.Tx, sessionID, uuid string) (bool, error) {
	d, err := tx.RecallPrefetches(ctx, sessionID, []string{uuid})
	if err != nil {
		return false, fmt.Errorf("recall.Decided: %w", err)
	}
	_, ok := d[uuid]
	return ok, nil
}

// Close decides that nothing is shown beside a user message, unless its
// prefetch was recorded first.
func Close(ctx context.Context, tx *store.Tx, sessionID, uuid string) error {
	if err := tx.CloseRecallPrefetches(ctx, sessionID, []string{uuid}); err != nil {
		return fmt.Errorf("recall.Close: %w", err)
	}
	return nil
}

func decision(known Known, uuid string) (store.RecallPrefetch, bool) {
	if known == nil {
		return store.RecallPrefetch{}, false
	}
	return known.Decision(uuid)
}
