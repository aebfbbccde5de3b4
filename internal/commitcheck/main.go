// Command commitcheck holds commit messages to the rule of
// docs/contributing.md ("Commit messages"): a subject `area: summary` of at
// most 72 characters and, when there is a body, a blank line after the
// subject. `make lint` runs it from the repository's root.
//
// It checks every commit, merges aside, that descends from the commit which
// added this file (found with git log --diff-filter=A, so it holds after a
// rebase changes the hashes); older history is left as it is. Where that
// commit is missing (a shallow clone cut above it) it checks the commits the
// clone has after its cut.
//
//	go run ./internal/commitcheck [-C dir]
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"time"
)

// Self is this file's path in the repository: the commit that added it is
// where checking starts.
const Self = "internal/commitcheck/main.go"

// MaxSubject is the longest subject allowed, in characters.
const MaxSubject = 72

// subjectRE is `area: summary`. An area is a package, a path or a make
// target (`gateway`, `tests/proxy`, `docs/testing.md`, `.ci/run`, `make
// lint`): one or two words, several separated by ", ".
var subjectRE = regexp.MustCompile(`^` + area + `(, ` + area + `)*: \S`)

const (
	word = `\.?[A-Za-z0-9][A-Za-z0-9_./-]*`
	area = word + `( ` + word + `)?`
)

// Problems lists what is wrong with one commit message (git's %B: the raw
// subject and body), or nothing.
func Problems(msg string) []string {
	msg = strings.TrimRight(msg, "\n")
	subject, body, hasBody := strings.Cut(msg, "\n")
	var out []string
	if n := len([]rune(subject)); n > MaxSubject {
		out = append(out, fmt.Sprintf("subject is %d characters, more than %d", n, MaxSubject))
	}
	switch {
	case strings.TrimSpace(subject) == "":
		out = append(out, "subject is empty")
	case subject != strings.TrimSpace(subject):
		out = append(out, "subject starts or ends with white space")
	case !subjectRE.MatchString(subject):
		out = append(out, "subject is not `area: summary` (an area such as `gateway`, `tests/proxy` "+
			"or `docs/testing.md`, a colon and a space, then the summary)")
	case strings.HasSuffix(subject, "."):
		out = append(out, "subject ends with a full stop")
	}
	if hasBody && !strings.HasPrefix(body, "\n") {
		out = append(out, "no blank line between the subject and the body")
	}
	return out
}

// Commit is one commit to check.
type Commit struct {
	Hash    string
	Message string
}

// Start is the oldest commit that added Self in the history of HEAD.
func Start(dir string) (string, error) {
	out, err := git(dir, "log", "--no-renames", "--diff-filter=A", "--format=%H", "HEAD", "--", Self)
	if err != nil {
		return "", err
	}
	hashes := strings.Fields(out)
	if len(hashes) == 0 {
		return "", fmt.Errorf("no commit in the history of HEAD adds %s", Self)
	}
	return hashes[len(hashes)-1], nil
}

// After lists the commits that descend from start up to HEAD, merges left
// out, oldest first.
func After(dir, start string) ([]Commit, error) {
	out, err := git(dir, "log", "--reverse", "--no-merges", "--ancestry-path", "--format=%H%x00%B%x00", start+"..HEAD")
	if err != nil {
		return nil, err
	}
	fields := strings.Split(out, "\x00")
	var commits []Commit
	for i := 0; i+1 < len(fields); i += 2 {
		commits = append(commits, Commit{Hash: strings.TrimSpace(fields[i]), Message: fields[i+1]})
	}
	return commits, nil
}

// Check checks the commits after start in dir's repository and returns one
// error naming every commit that breaks the rule, and how many it checked.
func Check(dir string) (int, error) {
	start, err := Start(dir)
	if err != nil {
		return 0, err
	}
	commits, err := After(dir, start)
	if err != nil {
		return 0, err
	}
	var bad []string
	for _, c := range commits {
		problems := Problems(c.Message)
		if len(problems) == 0 {
			continue
		}
		subject, _, _ := strings.Cut(c.Message, "\n")
		bad = append(bad, fmt.Sprintf("commit %.12s %q:\n  %s", c.Hash, subject, strings.Join(problems, "\n  ")))
	}
	if len(bad) > 0 {
		return len(commits), fmt.Errorf("%s\n%d of %d commits since %.12s break the rule of docs/contributing.md "+
			"(\"Commit messages\"); reword them (git rebase -i, reword) before they land",
			strings.Join(bad, "\n"), len(bad), len(commits), start)
	}
	return len(commits), nil
}

func git(dir string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", append([]string{"-C", dir}, args...)...) //nolint:gosec // git with arguments of this program's
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return string(out), nil
}

func main() {
	dir := flag.String("C", ".", "the repository to check")
	flag.Parse()
	if _, err := git(*dir, "rev-parse", "--git-dir"); err != nil {
		fmt.Fprintln(os.Stderr, "commitcheck: not a git checkout, no commit messages to check:", err)
		return
	}
	n, err := Check(*dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "commitcheck:", err)
		os.Exit(1)
	}
	fmt.Printf("commitcheck: commit messages follow docs/contributing.md (%d checked)\n", n)
}
