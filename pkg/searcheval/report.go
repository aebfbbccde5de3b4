package searcheval

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
)

// PrintTable writes the report as text: what was sent, the two systems'
// figures side by side, the same by question kind, and the skipped
// questions.
func (rep *Report) PrintTable(w io.Writer) error {
	fmt.Fprintf(w, "%d conversations, %d sessions, %d turns, %d questions", rep.Conversations, rep.Sessions, rep.Turns, rep.Questions)
	if len(rep.Skipped) > 0 {
		fmt.Fprintf(w, " (%d skipped)", len(rep.Skipped))
	}
	fmt.Fprintf(w, "; scopes %s\n\n", strings.Join(rep.Scopes, " "))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "system\tquestions\tany@5\tany@10\tall@5\tall@10\tMRR\t")
	row := func(name string, s Scores) {
		fmt.Fprintf(tw, "%s\t%d\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t\n", name, s.Questions, s.AnyAt5, s.AnyAt10, s.AllAt5, s.AllAt10, s.MRR)
	}
	row("mnemos", rep.Mnemos)
	row("bm25", rep.BM25)
	kinds := make([]string, 0, len(rep.ByKind))
	for k := range rep.ByKind {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		row("mnemos "+k, rep.ByKind[k].Mnemos)
		row("bm25 "+k, rep.ByKind[k].BM25)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if rep.MemoryHits > 0 {
		fmt.Fprintf(w, "\n%d of Mnemos's hits were memories: they name no turn and count as misses\n", rep.MemoryHits)
	}
	for _, s := range rep.Skipped {
		fmt.Fprintf(w, "skipped: conversation %s, question %s: %s\n", s.Conversation, s.Question, s.Reason)
	}
	return nil
}

// PrintBehind writes the questions where Mnemos ranked the first evidence
// turn lower than BM25 did (or not at all), with both ranks and both
// systems' hits: where to look when Mnemos trails.
func (rep *Report) PrintBehind(w io.Writer) {
	n := 0
	for _, r := range rep.Results {
		m, b := firstRank(r.Mnemos), firstRank(r.BM25)
		if b == 0 || (m != 0 && m <= b) {
			continue
		}
		n++
		fmt.Fprintf(w, "conversation %s, question %s (%s): %q\n  evidence %s; first found at mnemos %s, bm25 %d\n  mnemos hits %s\n  bm25 hits   %s\n",
			r.Conversation, r.ID, r.Kind, r.Question, strings.Join(r.Evidence, " "), rankText(m), b,
			hitsText(r.MnemosHits), hitsText(r.BM25Hits))
	}
	fmt.Fprintf(w, "%d questions where Mnemos ranks the evidence below BM25\n", n)
}

func rankText(r int) string {
	if r == 0 {
		return "-"
	}
	return fmt.Sprint(r)
}

func hitsText(hits []string) string {
	out := make([]string, len(hits))
	for i, h := range hits {
		out[i] = h
		if h == "" {
			out[i] = "(memory)"
		}
	}
	return strings.Join(out, " ")
}
