package extraction_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/memory"
	"github.com/mnemos-ai/mnemos/pkg/memory/extraction"
)

// today is a Sunday.
var today = time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)

func TestFindRulesSavesExplicitRequestsAndCorrections(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		text string
		kind extraction.RuleKind
		rule string
		name memory.Name
	}{
		{"remember that our staging DB is read-only on Fridays", extraction.KindRemember,
			"Our staging DB is read-only on Fridays.", "staging-db-read-only-fridays"},
		{"Remember: the release branch is cut every second Tuesday.", extraction.KindRemember,
			"The release branch is cut every second Tuesday.", "release-branch-cut-every-second"},
		{"Please keep in mind that Dana owns the billing service", extraction.KindRemember,
			"Dana owns the billing service.", "dana-owns-billing-service"},
		{"For future reference, the on-call rota lives in the ops wiki.", extraction.KindRemember,
			"The on-call rota lives in the ops wiki.", "call-rota-lives-ops-wiki"},
		{"From now on use pnpm", extraction.KindStanding, "Use pnpm.", "use-pnpm"},
		{"ok, from now on, please write commit messages in the imperative.", extraction.KindStanding,
			"Write commit messages in the imperative.", "write-commit-messages-imperative"},
		{"Going forward don't open PRs against main directly", extraction.KindStanding,
			"Don't open PRs against main directly.", "open-prs-against-main-directly"},
		{"remember to run the linter before pushing", extraction.KindStanding,
			"Run the linter before pushing.", "run-linter-before-pushing"},
		{"Always run the migrations in a transaction!", extraction.KindStanding,
			"Always run the migrations in a transaction.", "run-migrations-transaction"},
		{"never force-push to a shared branch.", extraction.KindStanding,
			"Never force-push to a shared branch.", "no-force-push-shared-branch"},
		{"don't mock the database in these tests", extraction.KindCorrection,
			"Don't mock the database in these tests.", "no-mock-database-tests"},
		{"Please do not add new dependencies without asking", extraction.KindCorrection,
			"Do not add new dependencies without asking.", "no-add-new-dependencies-without-asking"},
		{"stop adding trailing summaries", extraction.KindCorrection,
			"Stop adding trailing summaries.", "no-adding-trailing-summaries"},
		{"Actually, stop writing comments that restate the code.", extraction.KindCorrection,
			"Stop writing comments that restate the code.", "no-writing-comments-restate-code"},
		{"Don’t use emojis in commit messages", extraction.KindCorrection,
			"Don't use emojis in commit messages.", "no-use-emojis-commit-messages"},
	} {
		got := extraction.FindRules(c.text, today)
		require.Len(t, got, 1, "%q", c.text)
		require.Equal(t, c.kind, got[0].Kind, c.text)
		require.Equal(t, c.rule, got[0].Text, c.text)
		require.Equal(t, c.name, got[0].Name(), c.text)
		_, err := memory.ParseName(string(got[0].Name()))
		require.NoError(t, err, "a valid name")
	}
}

func TestFindRulesLeavesIncidentalMentionsAlone(t *testing.T) {
	t.Parallel()
	for _, text := range []string{
		"I don't know",
		"I don't know why the build fails.",
		"don't worry about it",
		"Don't worry, it's fine.",
		"don't bother with the docs for now",
		"Never mind.",
		"never mind, I found it",
		"Do you remember what we did yesterday?",
		"remember when we fixed the cache?",
		"Remember how the deploy broke",
		"Should we always use pnpm?",
		"Can you stop the server?",
		"Please stop the server.",
		"Stop.",
		"stop doing that",
		"don't do that",
		"Don't.",
		"It never worked on Windows.",
		"The tests always fail on CI",
		"We always was going to need this",
		"> Don't mock the database",
		"# Never commit secrets",
		"```\n// don't touch this\nalways_true()\n```",
		"<system-reminder>Don't use the Write tool for existing files.</system-reminder>",
		"<command-name>/clear</command-name>",
		"[Request interrupted by user]",
		"Why don't you use pnpm?",
		"Run the tests and tell me what fails.",
		"I'd never have guessed that.",
		"Remember",
		"From now on",
		"always",
		"",
	} {
		require.Empty(t, extraction.FindRules(text, today), "%q", text)
	}
}

func TestFindRulesInALongerMessage(t *testing.T) {
	t.Parallel()
	msg := `Thanks, that works. Don't worry about the flaky test for now.
- don't mock the database in these tests; they have to hit the real one.
From now on use pnpm. Can you also update the README?`
	got := extraction.FindRules(msg, today)
	require.Len(t, got, 2)
	require.Equal(t, "Don't mock the database in these tests.", got[0].Text)
	require.Equal(t, "don't mock the database in these tests;", got[0].Quote)
	require.Equal(t, "Use pnpm.", got[1].Text)

	// A pasted document or an expanded prompt is not the user's request.
	long := "Here is the style guide:\n" + repeat("Never write summaries. Always cite sources.\n", 60)
	require.Empty(t, extraction.FindRules(long, today))
}

func TestFindRulesMakesDatesAbsolute(t *testing.T) {
	t.Parallel()
	for text, want := range map[string]string{
		"remember that the deploy freeze starts tomorrow":          "The deploy freeze starts on 2026-11-23.",
		"remember that the API keys were rotated yesterday":        "The API keys were rotated on 2026-11-21.",
		"remember that staging is down until tomorrow":             "Staging is down until 2026-11-23.",
		"keep in mind that the audit is next week":                 "The audit is the week of 2026-11-23.",
		"remember that we switched to the new CI this week":        "We switched to the new CI the week of 2026-11-16.",
		"from now on, don't merge anything today without a review": "Don't merge anything on 2026-11-22 without a review.",
	} {
		got := extraction.FindRules(text, today)
		require.Len(t, got, 1, text)
		require.Equal(t, want, got[0].Text, text)
	}
	got := extraction.FindRules("remember that the freeze starts tomorrow", time.Time{})
	require.Equal(t, "The freeze starts tomorrow.", got[0].Text, "no date known, nothing to count from")
}

func TestRuleNames(t *testing.T) {
	t.Parallel()
	r := extraction.Rule{Kind: extraction.KindRemember, Text: "It is what it is."}
	n := r.Name()
	require.Regexp(t, `^rule-[0-9a-f]{8}$`, string(n), "no significant word: a digest")
	require.Equal(t, n, r.Name(), "deterministic")
	long := extraction.Rule{Kind: extraction.KindStanding, Text: "Use supercalifragilisticexpialidocious configurationmanagement infrastructureautomation everywhere."}
	require.LessOrEqual(t, len(long.Name()), 48)
	_, err := memory.ParseName(string(long.Name()))
	require.NoError(t, err)
}

func repeat(s string, n int) string {
	out := ""
	for range n {
		out += s
	}
	return out
}
