package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/mnemos-ai/mnemos/internal/testkit/llmtest/upstream"
)

// The scripts answer with the scripted upstream's replies.
type (
	reply   = upstream.Reply
	block   = upstream.Block
	request = upstream.Request
)

func text(s string) block               { return upstream.Text(s) }
func thinking(s string) block           { return upstream.Thinking(s) }
func tool(name string, input any) block { return upstream.ToolUse(name, input) }
func say(blocks ...block) reply         { return upstream.Say(blocks...) }
func final(s string) reply              { return upstream.Final(s) }
func sayThen(s string, calls ...block) reply {
	return upstream.Say(append([]block{text(s)}, calls...)...)
}

// failures are the errors of the calls from the n-th on.
func failures(calls []upstream.Call) []string {
	var errs []string
	for i, c := range calls {
		switch {
		case c.Err != nil:
			errs = append(errs, fmt.Sprintf("call %d: %v", i+1, c.Err))
		case c.Status == 404:
			errs = append(errs, fmt.Sprintf("call %d: unknown call %s %s", i+1, c.Method, c.Path))
		}
	}
	return errs
}

// logCalls keeps the calls' headers and bodies beside the run, for whoever
// has to change a script; first numbers the first of them.
func logCalls(dir string, first int, calls []upstream.Call) error {
	for i, c := range calls {
		var buf bytes.Buffer
		fmt.Fprintf(&buf, "%s %s?%s\n", c.Method, c.Path, c.RawQuery)
		for k, v := range c.Header {
			if strings.EqualFold(k, "x-api-key") || strings.EqualFold(k, "authorization") {
				v = []string{"(dummy)"}
			}
			fmt.Fprintf(&buf, "%s: %s\n", k, strings.Join(v, ", "))
		}
		buf.WriteString("\n")
		var pretty bytes.Buffer
		if json.Indent(&pretty, c.Body, "", "  ") == nil {
			buf.Write(pretty.Bytes())
		} else {
			buf.Write(c.Body)
		}
		name := filepath.Join(dir, fmt.Sprintf("call-%03d.txt", first+i))
		if err := os.WriteFile(name, buf.Bytes(), 0o600); err != nil {
			return err
		}
	}
	return nil
}
