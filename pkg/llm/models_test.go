package llm_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/llm"
)

func TestModelsPick(t *testing.T) {
	t.Parallel()
	models := llm.Models{llm.TaskCompaction: "big", llm.TaskRecall: ""}
	for _, tc := range []struct {
		name string
		req  llm.Request
		want string
	}{
		{"the request's model", llm.Request{Task: llm.TaskCompaction, Model: "asked"}, "asked"},
		{"the task's model", llm.Request{Task: llm.TaskCompaction}, "big"},
		{"an empty task model is none", llm.Request{Task: llm.TaskRecall}, "default"},
		{"no task model", llm.Request{Task: llm.TaskNotes}, "default"},
	} {
		require.Equal(t, tc.want, models.Pick(tc.req, "default"), tc.name)
	}
	require.Equal(t, "default", llm.Models(nil).Pick(llm.Request{Task: llm.TaskNotes}, "default"))
}
