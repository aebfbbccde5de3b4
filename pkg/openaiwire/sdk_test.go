package openaiwire_test

import (
	"encoding/json"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/pkg/openaiwire"
)

// TestResponsesItemsTheSDKWrites round-trips items as the official Go SDK
// encodes them, unknown types included.
func TestResponsesItemsTheSDKWrites(t *testing.T) {
	t.Parallel()
	params := []responses.ResponseInputItemUnionParam{
		responses.ResponseInputItemParamOfMessage("Rename the package, please.", responses.EasyInputMessageRoleUser),
		responses.ResponseInputItemParamOfFunctionCall(`{"path":"pkg/a"}`, "call_S1", "list_dir"),
		responses.ResponseInputItemParamOfCustomToolCall("call_S2", "*** Begin Patch\n*** End Patch", "apply_patch"),
		responses.ResponseInputItemParamOfItemReference("msg_earlier"),
		responses.ResponseInputItemParamOfCompaction("gAAAAABcompacted=="),
	}
	out := responses.ResponseInputItemParamOfFunctionCallOutput("a.go\nb.go")
	out.OfFunctionCallOutput.CallID = openai.String("call_S1")
	params = append(params, out)

	items := make([]json.RawMessage, len(params))
	for i, p := range params {
		raw, err := json.Marshal(p)
		require.NoError(t, err)
		items[i] = raw
	}
	conv, err := openaiwire.ResponsesInput(items)
	require.NoError(t, err)
	require.Equal(t, []string{
		"user: text",
		"assistant: tool_use tool_use",
		"user: openai_item", // the SDK writes an item reference without its type: {"id":…}
		"assistant: openai_item",
		"user: tool_result",
	}, blockTypes(conv.Messages))
	msgs, _ := stored(t, conv.Messages, nil)
	back, err := openaiwire.ResponsesItems(msgs, nil)
	require.NoError(t, err)
	requireSameItems(t, items, back)
}
