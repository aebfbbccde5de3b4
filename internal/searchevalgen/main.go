// Command searchevalgen writes the team's search evaluation set,
// testdata/search/eval.json, from the conversations written for it under
// conversations/. Each conversation file names its two speakers, its first
// date and its number of sessions, then its threads: stories one speaker
// tells over several sessions, in episodes of a few turns, with the
// questions they answer. The generator lays the episodes out over the
// sessions, opens and closes each session with small talk, dates the
// sessions a few days apart, numbers the turns ("D3:7") and resolves each
// question's evidence to turn ids. It is deterministic: the same files
// give the same set, byte for byte (TestEvalSetIsGenerated holds the
// checked-in file to it).
//
//	go run ./internal/searchevalgen -o testdata/search/eval.json
//
// or `go generate ./internal/searchevalgen`.
package main

//go:generate go run . -o ../../testdata/search/eval.json

import (
	"bytes"
	"embed"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
)

//go:embed conversations/*.txt
var files embed.FS

func main() {
	out := flag.String("o", "testdata/search/eval.json", "where to write the set")
	flag.Parse()
	data, err := generate()
	if err == nil {
		err = os.WriteFile(*out, data, 0o644) //nolint:gosec // a file of the repository, read by everyone
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "searchevalgen:", err)
		os.Exit(1)
	}
}

// The set, in the shape `mnemos eval search` reads (pkg/searcheval).
type (
	dataset struct {
		Conversations []conversation `json:"conversations"`
	}
	conversation struct {
		ID        string     `json:"id"`
		Sessions  []session  `json:"sessions"`
		Questions []question `json:"questions"`
	}
	session struct {
		ID    string `json:"id"`
		Date  string `json:"date"`
		Turns []turn `json:"turns"`
	}
	turn struct {
		ID      string `json:"id"`
		Speaker string `json:"speaker"`
		Text    string `json:"text"`
	}
	question struct {
		ID       string   `json:"id"`
		Question string   `json:"question"`
		Evidence []string `json:"evidence"`
		Kind     string   `json:"kind"`
	}
)

// generate reads every conversation file, in name order, and returns the
// set as indented JSON.
func generate() ([]byte, error) {
	names, err := files.ReadDir("conversations")
	if err != nil {
		return nil, err
	}
	var ds dataset
	for i, e := range names {
		text, err := files.ReadFile(path.Join("conversations", e.Name()))
		if err != nil {
			return nil, err
		}
		src, err := parseSource(string(text))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.Name(), err)
		}
		c, err := src.layOut(strings.TrimSuffix(e.Name(), ".txt"), uint64(i+1))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", e.Name(), err)
		}
		ds.Conversations = append(ds.Conversations, c)
	}
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", " ")
	if err := enc.Encode(ds); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// line is one turn of an episode: who says it (0 the thread's owner, 1
// the other speaker) and the text, with {A} and {B} for their names.
type line struct {
	who  int
	text string
}

// ref is one evidence turn: episode and line of its thread, from 0.
type ref struct{ episode, line int }

// sourceQuestion is a question of a thread and its evidence.
type sourceQuestion struct {
	text     string
	evidence []ref
}

type thread struct {
	owner     int // 0: the first speaker, 1: the second
	episodes  [][]line
	questions []sourceQuestion
}

// source is a conversation file, parsed.
type source struct {
	speakers [2]string
	start    time.Time
	sessions int
	threads  []thread
}

// parseSource reads a conversation file: a header of "speakers: A B",
// "start: RFC 3339" and "sessions: N"; then threads, each opened by
// "### owner=0" (or 1), whose episodes are separated by "--". In an
// episode "A: …" is said by the owner and "B: …" by the other; "? text =>
// refs" is a question whose evidence is a list of line numbers of the
// episode (from 1) or episode.line pairs of the thread (both from 1).
// Lines starting with "//" are comments.
func parseSource(text string) (*source, error) {
	src := &source{}
	var th *thread
	for n, raw := range strings.Split(text, "\n") {
		l := strings.TrimSpace(raw)
		if l == "" || strings.HasPrefix(l, "//") {
			continue
		}
		if err := src.parseLine(l, &th); err != nil {
			return nil, fmt.Errorf("line %d: %w", n+1, err)
		}
	}
	if src.speakers[0] == "" || src.start.IsZero() || src.sessions == 0 || len(src.threads) == 0 {
		return nil, fmt.Errorf("want speakers, start, sessions and threads")
	}
	return src, nil
}

func (src *source) parseLine(l string, th **thread) error {
	switch {
	case strings.HasPrefix(l, "speakers:"):
		f := strings.Fields(strings.TrimPrefix(l, "speakers:"))
		if len(f) != 2 {
			return fmt.Errorf("want two speakers")
		}
		src.speakers = [2]string{f[0], f[1]}
	case strings.HasPrefix(l, "start:"):
		t, err := time.Parse(time.RFC3339, strings.TrimSpace(strings.TrimPrefix(l, "start:")))
		if err != nil {
			return err
		}
		src.start = t
	case strings.HasPrefix(l, "sessions:"):
		n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(l, "sessions:")))
		if err != nil {
			return err
		}
		src.sessions = n
	case strings.HasPrefix(l, "### owner="):
		owner, err := strconv.Atoi(strings.TrimPrefix(l, "### owner="))
		if err != nil || owner < 0 || owner > 1 {
			return fmt.Errorf("owner is 0 or 1")
		}
		src.threads = append(src.threads, thread{owner: owner, episodes: [][]line{nil}})
		*th = &src.threads[len(src.threads)-1]
	case *th == nil:
		return fmt.Errorf("%q before the first thread", l)
	case l == "--":
		(*th).episodes = append((*th).episodes, nil)
	case strings.HasPrefix(l, "A:"), strings.HasPrefix(l, "B:"):
		ep := &(*th).episodes[len((*th).episodes)-1]
		*ep = append(*ep, line{who: int(l[0] - 'A'), text: strings.TrimSpace(l[2:])})
	case strings.HasPrefix(l, "?"):
		return (*th).parseQuestion(l)
	default:
		return fmt.Errorf("cannot read %q", l)
	}
	return nil
}

// parseQuestion reads "? text => refs" of the thread's current episode.
func (th *thread) parseQuestion(l string) error {
	text, refs, ok := strings.Cut(strings.TrimPrefix(l, "?"), "=>")
	if !ok {
		return fmt.Errorf("a question needs => and its evidence")
	}
	q := sourceQuestion{text: strings.TrimSpace(text)}
	cur := len(th.episodes) - 1
	for _, r := range strings.Fields(refs) {
		ep, ln, cross := strings.Cut(r, ".")
		if !cross {
			ep, ln = strconv.Itoa(cur+1), r
		}
		e, err1 := strconv.Atoi(ep)
		n, err2 := strconv.Atoi(ln)
		if err1 != nil || err2 != nil || e < 1 || e > len(th.episodes) || n < 1 || n > len(th.episodes[e-1]) {
			return fmt.Errorf("evidence %q names no line", r)
		}
		q.evidence = append(q.evidence, ref{e - 1, n - 1})
	}
	if len(q.evidence) == 0 {
		return fmt.Errorf("a question needs evidence")
	}
	th.questions = append(th.questions, q)
	return nil
}

// placed is an episode laid out: its thread and episode, and the session
// it goes into.
type placed struct{ thread, episode, session int }

// layOut spreads the threads' episodes over the sessions (each thread's in
// order, starting in one of the first sessions and evenly after), opens and
// closes every session with small talk, and numbers the turns.
func (src *source) layOut(id string, seed uint64) (conversation, error) {
	rng := rand.New(rand.NewPCG(seed, 0x5ea4c4e7a1)) //nolint:gosec // a fixed seed: the same set every time
	var all []placed
	for t, th := range src.threads {
		first := t % 3
		span := src.sessions - first
		for e := range th.episodes {
			all = append(all, placed{thread: t, episode: e, session: first + e*span/len(th.episodes)})
		}
	}
	// Within a session the threads take turns in an order of their own.
	order := rng.Perm(len(src.threads))
	sort.SliceStable(all, func(i, j int) bool {
		if all[i].session != all[j].session {
			return all[i].session < all[j].session
		}
		return order[all[i].thread] < order[all[j].thread]
	})
	c := conversation{ID: id}
	where := map[[3]int]string{} // thread, episode, line → turn id
	day := src.start
	next := 0
	for s := range src.sessions {
		date := day.Add(time.Duration(rng.IntN(5)-2) * time.Hour)
		sess := session{ID: strconv.Itoa(s + 1), Date: date.Format(time.RFC3339)}
		opener := rng.IntN(2) // who opens and closes: {A} of the small talk
		add := func(who int, text string) {
			tid := fmt.Sprintf("D%d:%d", s+1, len(sess.Turns)+1)
			sess.Turns = append(sess.Turns, turn{ID: tid, Speaker: src.speakers[who], Text: src.names(text, opener)})
		}
		for _, l := range smallTalk(openings, s+int(seed)*5) {
			add((l.who+opener)%2, l.text)
		}
		for ; next < len(all) && all[next].session == s; next++ {
			p := all[next]
			th := src.threads[p.thread]
			for i, l := range th.episodes[p.episode] {
				who := (l.who + th.owner) % 2
				tid := fmt.Sprintf("D%d:%d", s+1, len(sess.Turns)+1)
				sess.Turns = append(sess.Turns, turn{ID: tid, Speaker: src.speakers[who], Text: src.names(l.text, th.owner)})
				where[[3]int{p.thread, p.episode, i}] = tid
			}
		}
		for _, l := range smallTalk(closings, s*3+int(seed)) {
			add((l.who+opener)%2, l.text)
		}
		c.Sessions = append(c.Sessions, sess)
		day = day.AddDate(0, 0, 3+rng.IntN(6))
	}
	for t, th := range src.threads {
		for _, q := range th.questions {
			out := question{Question: src.names(q.text, th.owner)}
			for _, r := range q.evidence {
				out.Evidence = append(out.Evidence, where[[3]int{t, r.episode, r.line}])
			}
			out.Kind = kindOf(out)
			c.Questions = append(c.Questions, out)
		}
	}
	for i := range c.Questions {
		c.Questions[i].ID = fmt.Sprintf("%s-q%d", id, i+1)
	}
	return c, nil
}

// names puts the speakers' names for {A} (the owner) and {B}.
func (src *source) names(text string, owner int) string {
	return strings.NewReplacer("{A}", src.speakers[owner], "{B}", src.speakers[1-owner]).Replace(text)
}

// kindOf is "time" for a question about when (the answer is the
// session's date), "multi" for one with
// several evidence turns, else "single".
func kindOf(q question) string {
	lower := strings.ToLower(q.Question)
	switch {
	case strings.HasPrefix(lower, "when ") || strings.HasPrefix(lower, "what day") || strings.HasPrefix(lower, "what date"):
		return "time"
	case len(q.Evidence) > 1:
		return "multi"
	}
	return "single"
}
