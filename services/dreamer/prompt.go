package dreamer

import (
	"fmt"
	"strings"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/consolidate"
	"github.com/mnemos-ai/mnemos/pkg/dream"
	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/memtools"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

// systemPrompt is the consolidation's standing instructions, the same for
// every run (the cached prefix); the run's particulars follow in the first
// user message.
var systemPrompt = strings.TrimSpace(`
You look after the long-term memory of AI agents. Agents working with a user, on a project, in a checkout or as a given kind of agent save small notes ("memories") as they go; between their sessions you tend one scope of them. Your aim is a set of memories that is smaller, truer and easier to find than the one you were given, and that still knows everything it knew. You act only through the tools offered, and they reach only this scope.

Work in four phases.

1. Orient. List the memories (` + memtools.ToolList + `) and read the index (` + memtools.ToolIndexRead + `). Then read the memories worth a closer look: those whose descriptions overlap, those that may be out of date, those that speak of "yesterday" or "last week".

2. Gather recent signal. Look through the past sessions of this scope (` + ToolSearch + `) for what happened since the last consolidation: corrections the user made, decisions, facts that stopped being true, preferences confirmed or dropped. Search narrowly — a name, an error message, a setting — and search again with other words rather than broadly. A search answers with short snippets of a limited number of messages; you never read whole conversations, and you do not need to.

3. Consolidate. Where two or more memories say the same thing, keep the one that says it best, fold into it whatever the others add (` + memtools.ToolEdit + ` or ` + memtools.ToolWrite + `), and delete the others (` + memtools.ToolDelete + `, saying into which memory they went). Where a session contradicts a memory, correct that memory where it stands instead of adding another beside it. Write dates as dates: a relative one ("yesterday", "last Tuesday", "two weeks ago") becomes the absolute date it meant, counted from the day the memory was written (memory_read shows when). Feedback and project memories start with the rule or the fact, followed by **Why:** and **How to apply:**. Keep out what the code, its history or the agent's instructions already say, and the state of work in progress.

4. Prune and index. Bring the index back within its limits (` + memtools.ToolIndexWrite + `): one line per memory, '- [Title](name.md) — hook', the most useful first, each hook a few specific words. Every line points to a memory that exists; a memory you deleted leaves the index with it. Shorten hooks that run long.

Be conservative. A memory you are not sure is wrong or redundant stays as it is. Your changes are staged and applied together when you end your turn; if they delete or rewrite more of the scope's memories than this run is allowed (said below), none of them is applied and they wait for a person's approval instead. Finish by ending your turn with a short account of what you changed and why.`)

// brief is what the first message tells a run.
type brief struct {
	scope       memory.Scope
	live        int
	allowed     int
	last        time.Time
	now         time.Time
	limits      memory.Limits
	minSessions int
	trigger     string
}

// userMessage states the run's particulars.
func userMessage(b brief) llm.Message {
	var s strings.Builder
	fmt.Fprintf(&s, "Consolidate the memories of %s.\n\n", b.scope)
	fmt.Fprintf(&s, "Today is %s.\n", b.now.UTC().Format("2006-01-02"))
	if b.last.IsZero() {
		s.WriteString("This scope was never consolidated before.\n")
	} else {
		fmt.Fprintf(&s, "It was last consolidated on %s; look for what happened since.\n", b.last.UTC().Format("2006-01-02 15:04 UTC"))
	}
	if b.trigger == dream.TriggerManual {
		s.WriteString("An operator asked for this consolidation.\n")
	} else if b.minSessions > 0 {
		fmt.Fprintf(&s, "At least %d sessions of this scope were active since.\n", b.minSessions)
	}
	fmt.Fprintf(&s, "It holds %d memories; this run may delete or rewrite at most %d of them without approval.\n", b.live, b.allowed)
	s.WriteString(consolidate.FormatLimits(b.limits))
	return llm.Message{Role: "user", Content: turn.Content{{Type: turn.BlockText, Text: s.String()}}}
}
