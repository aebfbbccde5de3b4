// Package searcheval is the logic of `mnemos eval search`: it reads labelled
// conversations (turns with ids, questions with the ids of the turns that
// answer them), sends every turn to a running Mnemos as a round, asks every
// question of its search and of a plain BM25 over the same turns, and
// reports recall and mean reciprocal rank for both. cmd/mnemos only wires
// flags to it. docs/eval.md describes the file formats.
package searcheval

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Dataset is an evaluation set: conversations, each with its own questions.
type Dataset struct {
	Conversations []Conversation `json:"conversations"`
}

// Conversation is one long conversation between its speakers, in sessions,
// and the questions asked of it.
type Conversation struct {
	ID        string     `json:"id"`
	Sessions  []Session  `json:"sessions"`
	Questions []Question `json:"questions"`
}

// Session is one sitting of a conversation: its turns in order and, when
// known, when it took place.
type Session struct {
	ID    string    `json:"id"`
	Date  string    `json:"date,omitempty"`
	Turns []Turn    `json:"turns"`
	time  time.Time // Date parsed; zero when there is none
}

// Turn is one thing one speaker said. Its ID is unique in its conversation
// ("D1:3": session 1, turn 3, by convention).
type Turn struct {
	ID      string `json:"id"`
	Speaker string `json:"speaker"`
	Text    string `json:"text"`
	Date    string `json:"date,omitempty"`
}

// Question is asked of its conversation; Evidence names the turns that
// answer it.
type Question struct {
	ID       string   `json:"id,omitempty"`
	Question string   `json:"question"`
	Evidence []string `json:"evidence"`
	// Kind says what sort of question it is (single, multi, time…); it
	// only groups the results.
	Kind string `json:"kind,omitempty"`
}

// Skipped is a question left out of the evaluation and why: its evidence
// names no turn of its conversation, or it has none.
type Skipped struct {
	Conversation string `json:"conversation"`
	Question     string `json:"question"`
	Reason       string `json:"reason"`
}

// Shape names the layout a file was read in.
type Shape string

// The shapes Parse reads.
const (
	ShapeMnemos Shape = "mnemos"
	ShapeLoCoMo Shape = "locomo"
)

// Parse reads an evaluation file in either shape, says which it was, and
// checks it: every conversation has turns, turn ids are unique in their
// conversation, dates parse. Questions whose evidence names no turn, or
// that have none, are returned as skipped rather than refusing the file
// (public sets carry a few); everything else in the file is kept.
func Parse(data []byte) (*Dataset, Shape, []Skipped, error) {
	shape, err := detect(data)
	if err != nil {
		return nil, "", nil, err
	}
	var ds *Dataset
	switch shape {
	case ShapeLoCoMo:
		ds, err = parseLoCoMo(data)
	default:
		ds, err = parseMnemos(data)
	}
	if err != nil {
		return nil, shape, nil, err
	}
	skipped, err := ds.check()
	if err != nil {
		return nil, shape, nil, err
	}
	return ds, shape, skipped, nil
}

// detect tells the shapes apart by their top level: an object with
// "conversations" is this package's; an array of objects with
// "conversation" (or one such object) is LoCoMo's.
func detect(data []byte) (Shape, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return "", errors.New("the file is empty")
	}
	var probe map[string]json.RawMessage
	switch data[0] {
	case '[':
		var items []map[string]json.RawMessage
		if err := json.Unmarshal(data, &items); err != nil {
			return "", fmt.Errorf("not JSON of either shape: %w", err)
		}
		if len(items) == 0 {
			return "", errors.New("the file is an empty array: no conversation")
		}
		probe = items[0]
	case '{':
		if err := json.Unmarshal(data, &probe); err != nil {
			return "", fmt.Errorf("not JSON of either shape: %w", err)
		}
	default:
		return "", errors.New(`not JSON of either shape: want {"conversations": …} or a LoCoMo array`)
	}
	switch {
	case probe["conversations"] != nil:
		if data[0] == '[' {
			return "", errors.New(`an array of {"conversations": …}: want one such object`)
		}
		return ShapeMnemos, nil
	case probe["conversation"] != nil:
		return ShapeLoCoMo, nil
	}
	return "", errors.New(`neither shape: want an object with "conversations" or LoCoMo samples with "conversation" and "qa"`)
}

func parseMnemos(data []byte) (*Dataset, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var ds Dataset
	if err := dec.Decode(&ds); err != nil {
		return nil, fmt.Errorf("read conversations: %w", err)
	}
	return &ds, nil
}

// locomoSample is one sample of a LoCoMo file: what this package reads of
// it. Its other fields (summaries, observations, answers) are ignored.
type locomoSample struct {
	SampleID     string                     `json:"sample_id"`
	Conversation map[string]json.RawMessage `json:"conversation"`
	QA           []struct {
		Question string          `json:"question"`
		Evidence json.RawMessage `json:"evidence"`
		Category json.RawMessage `json:"category"`
	} `json:"qa"`
}

type locomoTurn struct {
	Speaker string `json:"speaker"`
	DiaID   string `json:"dia_id"`
	Text    string `json:"text"`
}

var locomoSessionKey = regexp.MustCompile(`^session_(\d+)$`)

func parseLoCoMo(data []byte) (*Dataset, error) {
	data = bytes.TrimSpace(data)
	var samples []locomoSample
	if data[0] == '{' {
		samples = make([]locomoSample, 1)
		if err := json.Unmarshal(data, &samples[0]); err != nil {
			return nil, fmt.Errorf("read LoCoMo sample: %w", err)
		}
	} else if err := json.Unmarshal(data, &samples); err != nil {
		return nil, fmt.Errorf("read LoCoMo samples: %w", err)
	}
	ds := &Dataset{}
	for i, s := range samples {
		c, err := s.conversation(i)
		if err != nil {
			return nil, err
		}
		ds.Conversations = append(ds.Conversations, c)
	}
	return ds, nil
}

// conversation turns sample i into a Conversation: its session_N lists in
// the order of N, each dated by session_N_date_time.
func (s locomoSample) conversation(i int) (Conversation, error) {
	c := Conversation{ID: s.SampleID}
	if c.ID == "" {
		c.ID = strconv.Itoa(i + 1)
	}
	var numbers []int
	for k := range s.Conversation {
		if m := locomoSessionKey.FindStringSubmatch(k); m != nil {
			n, err := strconv.Atoi(m[1])
			if err != nil {
				return c, fmt.Errorf("sample %s: %s: %w", c.ID, k, err)
			}
			numbers = append(numbers, n)
		}
	}
	sort.Ints(numbers)
	for _, n := range numbers {
		key := fmt.Sprintf("session_%d", n)
		var turns []locomoTurn
		if err := json.Unmarshal(s.Conversation[key], &turns); err != nil {
			return c, fmt.Errorf("sample %s: %s: %w", c.ID, key, err)
		}
		sess := Session{ID: strconv.Itoa(n)}
		if raw, ok := s.Conversation[key+"_date_time"]; ok {
			if err := json.Unmarshal(raw, &sess.Date); err != nil {
				return c, fmt.Errorf("sample %s: %s_date_time: %w", c.ID, key, err)
			}
		}
		for _, t := range turns {
			sess.Turns = append(sess.Turns, Turn{ID: t.DiaID, Speaker: t.Speaker, Text: t.Text})
		}
		c.Sessions = append(c.Sessions, sess)
	}
	for j, qa := range s.QA {
		q := Question{ID: strconv.Itoa(j + 1), Question: qa.Question, Kind: category(qa.Category)}
		var ev []string
		if len(qa.Evidence) > 0 && string(qa.Evidence) != "null" {
			if err := json.Unmarshal(qa.Evidence, &ev); err != nil {
				return c, fmt.Errorf("sample %s: qa %d: evidence: want a list of turn ids: %w", c.ID, j+1, err)
			}
		}
		q.Evidence = ev
		c.Questions = append(c.Questions, q)
	}
	return c, nil
}

// category is a LoCoMo question's category as text ("category 2"), or ""
// when it has none.
func category(raw json.RawMessage) string {
	s := strings.Trim(string(raw), `" `)
	if s == "" || s == "null" {
		return ""
	}
	return "category " + s
}

// dateLayouts are the dates a file may give: RFC 3339, a day, or LoCoMo's
// "1:56 pm on 8 May, 2023".
var dateLayouts = []string{
	time.RFC3339, "2006-01-02T15:04", "2006-01-02 15:04", "2006-01-02",
	"3:04 pm on 2 January, 2006", "3:04 PM on 2 January, 2006", "3:04 pm on 2 Jan, 2006", "3:04 PM on 2 Jan, 2006",
}

// parseDate reads a date in one of dateLayouts, as UTC when it names no zone.
func parseDate(s string) (time.Time, error) {
	norm := strings.Join(strings.Fields(s), " ")
	for _, layout := range dateLayouts {
		if t, err := time.Parse(layout, norm); err == nil {
			return t.UTC(), nil
		}
	}
	return time.Time{}, fmt.Errorf("date %q: want RFC 3339, YYYY-MM-DD or \"1:56 pm on 8 May, 2023\"", s)
}

// evidenceIDs splits one evidence entry: public sets sometimes list
// several ids in one string ("D8:6; D9:17").
func evidenceIDs(entry string) []string {
	return strings.FieldsFunc(entry, func(r rune) bool { return r == ';' || r == ',' || r == ' ' })
}

// check validates the dataset in place (dates parsed, evidence split) and
// drops the questions it cannot ask, returning them.
func (ds *Dataset) check() ([]Skipped, error) {
	if len(ds.Conversations) == 0 {
		return nil, errors.New("no conversation")
	}
	var skipped []Skipped
	seenConv := map[string]bool{}
	for ci := range ds.Conversations {
		c := &ds.Conversations[ci]
		if c.ID == "" {
			c.ID = strconv.Itoa(ci + 1)
		}
		if seenConv[c.ID] {
			return nil, fmt.Errorf("conversation %s: the id is used twice", c.ID)
		}
		seenConv[c.ID] = true
		turns, err := c.checkTurns()
		if err != nil {
			return nil, err
		}
		kept := c.Questions[:0]
		for qi, q := range c.Questions {
			if q.ID == "" {
				q.ID = strconv.Itoa(qi + 1)
			}
			var ids []string
			for _, e := range q.Evidence {
				ids = append(ids, evidenceIDs(e)...)
			}
			q.Evidence = ids
			if reason := questionProblem(q, turns); reason != "" {
				skipped = append(skipped, Skipped{Conversation: c.ID, Question: q.ID, Reason: reason})
				continue
			}
			kept = append(kept, q)
		}
		c.Questions = kept
	}
	return skipped, nil
}

// questionProblem says why q cannot be asked of a conversation with the
// given turn ids, or "" when it can.
func questionProblem(q Question, turns map[string]bool) string {
	switch {
	case strings.TrimSpace(q.Question) == "":
		return "the question is empty"
	case len(q.Evidence) == 0:
		return "it names no evidence turn"
	}
	for _, id := range q.Evidence {
		if !turns[id] {
			return fmt.Sprintf("evidence %s names no turn of the conversation", id)
		}
	}
	return ""
}

// checkTurns checks a conversation's sessions and turns, parses their
// dates, and returns the set of its turn ids.
func (c *Conversation) checkTurns() (map[string]bool, error) {
	ids := map[string]bool{}
	n := 0
	for si := range c.Sessions {
		s := &c.Sessions[si]
		if s.ID == "" {
			s.ID = strconv.Itoa(si + 1)
		}
		if s.Date != "" {
			t, err := parseDate(s.Date)
			if err != nil {
				return nil, fmt.Errorf("conversation %s, session %s: %w", c.ID, s.ID, err)
			}
			s.time = t
		}
		for _, t := range s.Turns {
			switch {
			case t.ID == "":
				return nil, fmt.Errorf("conversation %s, session %s: a turn has no id", c.ID, s.ID)
			case ids[t.ID]:
				return nil, fmt.Errorf("conversation %s: turn id %s is used twice", c.ID, t.ID)
			case strings.TrimSpace(t.Text) == "":
				return nil, fmt.Errorf("conversation %s: turn %s has no text", c.ID, t.ID)
			}
			if t.Date != "" {
				if _, err := parseDate(t.Date); err != nil {
					return nil, fmt.Errorf("conversation %s, turn %s: %w", c.ID, t.ID, err)
				}
			}
			ids[t.ID] = true
			n++
		}
	}
	if n == 0 {
		return nil, fmt.Errorf("conversation %s has no turn", c.ID)
	}
	return ids, nil
}

// Turns is the number of turns of the dataset.
func (ds *Dataset) Turns() int {
	n := 0
	for _, c := range ds.Conversations {
		for _, s := range c.Sessions {
			n += len(s.Turns)
		}
	}
	return n
}

// Sessions is the number of sessions of the dataset.
func (ds *Dataset) Sessions() int {
	n := 0
	for _, c := range ds.Conversations {
		n += len(c.Sessions)
	}
	return n
}

// Questions is the number of questions of the dataset that are asked.
func (ds *Dataset) Questions() int {
	n := 0
	for _, c := range ds.Conversations {
		n += len(c.Questions)
	}
	return n
}

// Document is the text a turn is searched by, in Mnemos and in BM25 alike:
// its speaker, a colon, and what was said.
func (t Turn) Document() string {
	if t.Speaker == "" {
		return t.Text
	}
	return t.Speaker + ": " + t.Text
}
