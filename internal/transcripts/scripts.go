package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// transcripts are the sample transcripts, in the order they are made.
func transcripts() []transcript {
	return []transcript{shortSession(), toolHeavySession(), subagentSession(), longSession()}
}

// writeFiles writes files (name to content) under dir.
func writeFiles(dir string, files map[string]string) error {
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil { //nolint:gosec // sample files for the CLI to read
			return err
		}
	}
	return nil
}

func read(work, name string) block {
	return tool("Read", map[string]any{"file_path": filepath.Join(work, name)})
}

func bash(command, description string) block {
	return tool("Bash", map[string]any{"command": command, "description": description})
}

// shortSession: two user turns; the first reads a file that is not there (a
// tool result with is_error), then the right one; the second is answered
// from what was read.
func shortSession() transcript {
	return transcript{
		name:  "short",
		tools: []string{"Read", "Bash"},
		setup: func(work string) error {
			return writeFiles(work, map[string]string{
				"greet.sh": "#!/bin/sh\n# Greets whoever is named, or the world.\nname=${1:-world}\necho \"hello, $name\"\n",
			})
		},
		runs: func(work string) []run {
			return []run{
				{
					prompt: "What does greet.sh print when I run it without arguments?",
					main: []reply{
						say(thinking("The user asks about greet.sh; I should read it before answering."),
							text("Let me read the script."),
							read(work, "greet")),
						sayThen("No file by that name; it has the .sh suffix.", read(work, "greet.sh")),
						final("Run without arguments, `greet.sh` prints `hello, world`: `name` defaults to `world` when no first argument is given."),
					},
				},
				{
					prompt: "And with the argument Ada?",
					cont:   true,
					main:   []reply{final("It prints `hello, Ada`.")},
				},
			}
		},
	}
}

// ledger is the tool-heavy session's project: three months of expenses in
// CSV, a script that totals them, a test and notes.
type ledger struct {
	months []string
	rows   map[string][]expense // by month
}

type expense struct {
	date, category string
	cents          int
}

func newLedger() ledger {
	l := ledger{months: []string{"jan", "feb", "mar"}, rows: map[string][]expense{}}
	cats := []string{"rent", "food", "travel", "books", "power"}
	for m, month := range l.months {
		for d := 1; d <= 24; d++ {
			cat := cats[(d*7+m)%len(cats)]
			cents := 500 + ((d*37+m*101)%90)*125
			if cat == "rent" {
				cents = 65000
			}
			l.rows[month] = append(l.rows[month], expense{fmt.Sprintf("2026-%02d-%02d", m+1, d), cat, cents})
		}
	}
	return l
}

func (l ledger) csv(month string) string {
	var b strings.Builder
	b.WriteString("date,category,cents\n")
	for _, r := range l.rows[month] {
		fmt.Fprintf(&b, "%s,%s,%d\n", r.date, r.category, r.cents)
	}
	return b.String()
}

func (l ledger) total(month string) int {
	t := 0
	for _, r := range l.rows[month] {
		t += r.cents
	}
	return t
}

func (l ledger) byCategory(month string) map[string]int {
	out := map[string]int{}
	for _, r := range l.rows[month] {
		out[r.category] += r.cents
	}
	return out
}

func euros(cents int) string { return fmt.Sprintf("%d.%02d", cents/100, cents%100) }

// toolHeavySession: two user turns, the first of four rounds with up to
// four tool calls each (Read and Bash), the second of one more call.
func toolHeavySession() transcript {
	l := newLedger()
	sum := 0
	for _, m := range l.months {
		sum += l.total(m)
	}
	return transcript{
		name:  "tool_heavy",
		tools: []string{"Read", "Bash"},
		setup: func(work string) error {
			files := map[string]string{
				"ledger.sh": "#!/bin/sh\n# Prints the total of each CSV file named, in euros, then the sum.\n" +
					"awk -F, 'FNR > 1 { t[FILENAME] += $3; all += $3 }\n" +
					"  END { for (f in t) printf \"%s %.2f\\n\", f, t[f] / 100; printf \"sum %.2f\\n\", all / 100 }' \"$@\" | sort\n",
				"test.sh": "#!/bin/sh\n# Checks ledger.sh against the sum written in NOTES.md.\n" +
					"want=$(sed -n 's/^Sum: //p' NOTES.md)\ngot=$(sh ledger.sh data/*.csv | sed -n 's/^sum //p')\n" +
					"if [ \"$want\" = \"$got\" ]; then echo \"ok: sum $got\"; else echo \"FAIL: NOTES.md says $want, ledger.sh says $got\"; exit 1; fi\n",
				"NOTES.md": "# Household ledger\n\nOne CSV per month in data/, amounts in cents.\n\n" +
					"Sum: " + euros(sum) + "\n\n- TODO: add April when the bank export arrives\n- TODO: split travel into train and hotel\n",
			}
			for _, m := range l.months {
				files["data/"+m+".csv"] = l.csv(m)
			}
			return writeFiles(work, files)
		},
		runs: func(work string) []run {
			mar := l.byCategory("mar")
			return []run{
				{
					prompt: "Check this ledger project: do the monthly files add up to the sum in NOTES.md, and does test.sh pass?",
					main: []reply{
						say(thinking("Start with the notes and the script, and see what data there is."),
							text("I'll look at the notes, the script and the data files."),
							read(work, "NOTES.md"), read(work, "ledger.sh"),
							bash("ls -la data", "List the data files"),
							bash("wc -l data/*.csv", "Count lines of each CSV")),
						sayThen("Three months of 24 rows each. Reading them and running the script.",
							read(work, "data/jan.csv"), read(work, "data/feb.csv"), read(work, "data/mar.csv"),
							bash("sh ledger.sh data/*.csv", "Total each month")),
						sayThen("The totals look consistent; now the test and the open items.",
							bash("sh test.sh", "Run the ledger test"),
							bash("grep -rn TODO .", "Find open TODOs")),
						final(fmt.Sprintf("Everything adds up.\n\n- January %s, February %s, March %s: sum %s €, as NOTES.md says.\n"+
							"- `test.sh` passes (`ok: sum %s`).\n- Two TODOs remain in NOTES.md: add April, and split travel into train and hotel.",
							euros(l.total("jan")), euros(l.total("feb")), euros(l.total("mar")), euros(sum), euros(sum))),
					},
				},
				{
					prompt: "Give me March by category.",
					cont:   true,
					main: []reply{
						sayThen("Summing March per category.",
							bash("awk -F, 'FNR > 1 { t[$2] += $3 } END { for (c in t) printf \"%s %.2f\\n\", c, t[c] / 100 }' data/mar.csv | sort",
								"Total March per category")),
						final(fmt.Sprintf("March by category: books %s, food %s, power %s, rent %s, travel %s.",
							euros(mar["books"]), euros(mar["food"]), euros(mar["power"]), euros(mar["rent"]), euros(mar["travel"]))),
					},
				},
			}
		},
	}
}

// subMarker is in the prompt the main agent gives its sub-agent; the
// upstream knows the sub-agent's calls by it.
const subMarker = "Search this directory for every place that sets a retry limit"

// subagentSession: one user turn; the main agent lists the directory,
// hands the search to a general-purpose sub-agent (the Agent tool), which
// greps and reads, and answers from its report.
func subagentSession() transcript {
	return transcript{
		name:      "subagent",
		tools:     []string{"Read", "Bash", "Agent"},
		subMarker: subMarker,
		setup: func(work string) error {
			return writeFiles(work, map[string]string{
				"service/config.yaml": "listen: 127.0.0.1:7070\nupstream:\n  url: http://127.0.0.1:9090\n  timeout: 5s\n  retry_limit: 3\n",
				"service/retry.go": "package service\n\nimport \"time\"\n\n// maxAttempts is used when the configuration sets no retry_limit.\n" +
					"const maxAttempts = 5\n\n// backoff is the wait before attempt n (from 1).\nfunc backoff(n int) time.Duration {\n" +
					"\treturn time.Duration(n*n) * 100 * time.Millisecond\n}\n",
				"service/main.go": "package service\n\n// Run starts the service with the configuration at path.\nfunc Run(path string) error {\n" +
					"\tcfg, err := load(path)\n\tif err != nil {\n\t\treturn err\n\t}\n\treturn serve(cfg)\n}\n",
				"README.md": "# service\n\nA small proxy. See service/config.yaml.\n",
			})
		},
		sub: func(work string) []reply {
			return []reply{
				sayThen("Searching for retry settings.", bash("grep -rn -i retry .", "Search for retry settings")),
				say(read(work, "service/config.yaml"), read(work, "service/retry.go")),
				final("Two places set a retry limit:\n\n1. `service/config.yaml` line 5: `retry_limit: 3` under `upstream`.\n" +
					"2. `service/retry.go` line 6: `const maxAttempts = 5`, the default used when the configuration sets no `retry_limit`.\n\n" +
					"With the configuration as it is, the service retries 3 times."),
			}
		},
		runs: func(work string) []run {
			return []run{{
				prompt: "Where is the retry limit of this service set? Use an agent for the search.",
				main: []reply{
					sayThen("Let me see what is here first.", bash("ls -R", "List the project")),
					sayThen("I'll have an agent search the project.", tool("Agent", map[string]any{
						"description":       "Find retry limit settings",
						"prompt":            subMarker + " (configuration files and code). Report each file, line and value, and which one wins.",
						"subagent_type":     "general-purpose",
						"run_in_background": false,
					})),
					final("The retry limit is set in `service/config.yaml` (`upstream.retry_limit: 3`). " +
						"`service/retry.go` has a fallback, `maxAttempts = 5`, used only when the configuration sets none."),
				},
			}}
		},
	}
}

// logFile is a generated log of about n lines; errors start at errFrom.
func logFile(name string, n, errFrom int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		sec := i * 7
		level, msg := "INFO", fmt.Sprintf("request handled route=/api/items/%d status=200 duration_ms=%d bytes=%d", (i*31)%977, 3+(i*13)%40, 512+(i*97)%4096)
		switch {
		case i >= errFrom && i%3 == 0:
			level, msg = "ERROR", fmt.Sprintf("upstream call failed route=/api/items/%d err=\"dial tcp 10.0.4.%d:5432: connect: connection refused\" attempt=%d", (i*31)%977, 10+i%5, 1+i%3)
		case i >= errFrom-40 && i%5 == 0:
			level, msg = "WARN", fmt.Sprintf("slow query table=items duration_ms=%d pool_in_use=%d/20", 800+(i*17)%900, 14+i%7)
		}
		fmt.Fprintf(&b, "2026-11-02T%02d:%02d:%02dZ %-5s %s host=%s pid=%d %s\n", 1+sec/3600, (sec/60)%60, sec%60, level, name, name, 4100+i%3, msg)
	}
	return b.String()
}

// longSession: five user turns over large logs. The first two read six
// files of about 70 KB each, the third is /compact (the CLI asks the
// upstream for a summary), the fourth reads more after the compaction, the
// fifth is a short question.
func longSession() transcript {
	names := []string{"web-1", "web-2", "web-3", "worker-1", "worker-2", "cron"}
	return transcript{
		name:  "long",
		tools: []string{"Read", "Bash"},
		setup: func(work string) error {
			files := map[string]string{}
			for i, n := range names {
				files["logs/"+n+".log"] = logFile(n, 640, 340+i*20)
			}
			files["logs/db.log"] = logFile("db", 520, 220)
			files["incident.md"] = "# Incident 2026-11-02\n\nOpened by on-call at 01:40 UTC. Root cause: to be written.\n"
			return writeFiles(work, files)
		},
		runs: func(work string) []run {
			logRead := func(n string) block { return read(work, "logs/"+n+".log") }
			return []run{
				{
					prompt: "The logs in logs/ are from last night's outage. Read the three web logs and tell me when the errors start.",
					main: []reply{
						sayThen("Reading the three web logs.", logRead("web-1"), logRead("web-2"), logRead("web-3")),
						final("Errors start in web-1 first, at about 01:35 UTC, then in web-2 and web-3 a few minutes later. " +
							"Every error is the same: `connection refused` from the database at 10.0.4.x:5432, after a run of slow-query warnings with the pool nearly full."),
					},
				},
				{
					prompt: "Now read the worker and cron logs too, and count the errors per file.",
					cont:   true,
					main: []reply{
						sayThen("Reading the other three logs.", logRead("worker-1"), logRead("worker-2"), logRead("cron")),
						sayThen("Counting errors in every log.", bash("grep -c ERROR logs/*.log", "Count errors per log")),
						final("The workers and cron fail the same way, a little later than the web servers: the database stopped accepting connections and every service saw it. " +
							"The counts per file are above; the web servers have the most errors because they started failing first."),
					},
				},
				{
					prompt:  "/compact",
					cont:    true,
					summary: longSummary,
				},
				{
					prompt: "Read the database log and incident.md. What was the root cause?",
					cont:   true,
					main: []reply{
						sayThen("Reading the database log and the incident notes.", read(work, "logs/db.log"), read(work, "incident.md")),
						final("Root cause: the database's connection pool filled up under slow queries on `items` (warnings from about 01:18), " +
							"then it refused new connections from about 01:23, and every service failed its calls to 10.0.4.x:5432. " +
							"`incident.md` still says the root cause is to be written."),
					},
				},
				{
					prompt: "One line for the incident report, please.",
					cont:   true,
					main: []reply{
						final("Slow queries on `items` exhausted the database's connection pool; from about 01:23 UTC it refused connections and every service's database calls failed until the pool recovered."),
					},
				},
			}
		},
	}
}

// longSummary is the summary the upstream writes when the long session is
// compacted.
const longSummary = "<analysis>\nThe user is investigating last night's outage from the logs in logs/. " +
	"I read six of them and counted errors.\n</analysis>\n\n<summary>\n" +
	"1. Primary request: find when and why the outage of 2026-11-02 started, from the logs in logs/.\n" +
	"2. Files read: logs/web-1.log, logs/web-2.log, logs/web-3.log, logs/worker-1.log, logs/worker-2.log, logs/cron.log " +
	"(640 lines each).\n" +
	"3. Findings: slow-query warnings with the pool nearly full, then `connection refused` errors from the database at 10.0.4.x:5432, " +
	"first in web-1 at about 01:35 UTC, then in the other services. Error counts per file come from `grep -c ERROR logs/*.log`.\n" +
	"4. Not read yet: logs/db.log and incident.md.\n" +
	"5. Current work: none pending; the user will ask about the root cause next.\n</summary>"
