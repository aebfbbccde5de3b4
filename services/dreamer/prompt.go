package dreamer

import (
	_ "embed" // the prompt
	"fmt"
	"strings"
	"text/template"
	"time"

	"github.com/mnemos-ai/mnemos/pkg/llm"
	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/memory/consolidate"
	"github.com/mnemos-ai/mnemos/pkg/memory/dream"
	"github.com/mnemos-ai/mnemos/pkg/memory/memtools"
	"github.com/mnemos-ai/mnemos/pkg/turn"
)

//go:embed prompts/system.md
var systemPromptText string

// systemPrompt is the consolidation's standing instructions
// (prompts/system.md, a text/template naming the tools), the same for every
// run (the cached prefix); the run's particulars follow in the first user
// message.
var systemPrompt = func() string {
	t := template.Must(template.New("system.md").Option("missingkey=error").Parse(strings.TrimSpace(systemPromptText)))
	var b strings.Builder
	if err := t.Execute(&b, map[string]string{
		"List": memtools.ToolList, "IndexRead": memtools.ToolIndexRead, "Search": ToolSearch,
		"Edit": memtools.ToolEdit, "Write": memtools.ToolWrite, "Delete": memtools.ToolDelete,
		"IndexWrite": memtools.ToolIndexWrite,
	}); err != nil {
		panic("dreamer: the prompt template system.md: " + err.Error())
	}
	return b.String()
}()

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
