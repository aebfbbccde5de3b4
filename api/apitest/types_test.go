package apitest_test

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mnemos-ai/mnemos/api/apitest"
)

// A document of the shapes CheckBodies must tell apart.
const typesDoc = `{
  "openapi": "3.1.0",
  "paths": {"/health": {"get": {"responses": {
    "200": {"content": {"application/json": {"schema": {"type": "object", "required": ["status"], "properties": {"status": {"const": "ok"}, "targets": {"type": "object", "additionalProperties": {"type": "string"}}}}}}},
    "503": {"content": {"application/json": {"schema": {"type": "object", "required": ["status", "failed"], "properties": {"status": {"const": "down"}, "failed": {"type": "object", "additionalProperties": {"type": "string"}}}}}}}
  }}}},
  "components": {"schemas": {
    "Kind": {"type": "string", "enum": ["a", "b"]},
    "Item": {"type": "object", "required": ["id", "kind", "at"], "properties": {
      "id": {"type": "integer"}, "kind": {"$ref": "#/components/schemas/Kind"}, "at": {"type": "string", "format": "date-time"},
      "note": {"type": "string"}}},
    "Page": {"type": "object", "required": ["items", "next", "last"], "properties": {
      "items": {"type": "array", "items": {"$ref": "#/components/schemas/Item"}},
      "next": {"type": "string"},
      "last": {"anyOf": [{"$ref": "#/components/schemas/Item"}, {"type": "null"}]},
      "counts": {"type": "object", "additionalProperties": {"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}}},
      "raw": {}}}
  }}
}`

type item struct {
	ID   int64     `json:"id"`
	Kind string    `json:"kind"`
	At   time.Time `json:"at"`
	Note string    `json:"note,omitempty"`
}

type count struct {
	N int `json:"n"`
}

type page struct {
	Items  []item           `json:"items"`
	Next   string           `json:"next"`
	Last   *item            `json:"last"`
	Counts map[string]count `json:"counts,omitempty"`
	Raw    json.RawMessage  `json:"raw,omitempty"`
}

type health struct {
	Status  string            `json:"status"`
	Targets map[string]string `json:"targets,omitempty"`
	Failed  map[string]string `json:"failed,omitempty"`
}

type base struct {
	ID   int64  `json:"id"`
	Kind string `json:"kind"`
}

// embedded is item by embedding: the same JSON.
type embedded struct {
	base
	At   time.Time `json:"at"`
	Note string    `json:"note,omitempty"`
}

func TestCheckBodiesAgreesWithWhatMatches(t *testing.T) {
	t.Parallel()
	problems, checked, err := apitest.CheckBodies([]byte(typesDoc), []apitest.Body{
		{Schemas: []string{"#/components/schemas/Page"}, Type: reflect.TypeFor[page]()},
		{Schemas: []string{"#/components/schemas/Item"}, Type: reflect.TypeFor[embedded]()},
		{Schemas: []string{
			"#/paths/~1health/get/responses/200/content/application~1json/schema",
			"#/paths/~1health/get/responses/503/content/application~1json/schema",
		}, Type: reflect.TypeFor[health]()},
	})
	require.NoError(t, err)
	require.Empty(t, problems)
	for _, typ := range []reflect.Type{reflect.TypeFor[page](), reflect.TypeFor[item](), reflect.TypeFor[count](), reflect.TypeFor[base](), reflect.TypeFor[health]()} {
		require.True(t, checked[typ], typ.String())
	}
}

func TestCheckBodiesFindsEachDisagreement(t *testing.T) {
	t.Parallel()
	type missingField struct {
		ID   int64     `json:"id"`
		Kind string    `json:"kind"`
		At   time.Time `json:"at"`
	}
	type extraField struct {
		item
		Extra bool `json:"extra"`
	}
	type optionalRequired struct {
		ID   int64     `json:"id,omitempty"`
		Kind string    `json:"kind"`
		At   time.Time `json:"at"`
		Note string    `json:"note"`
	}
	type wrongTypes struct {
		ID   float64 `json:"id"`
		Kind int     `json:"kind"`
		At   string  `json:"at"`
		Note string  `json:"note,omitempty"`
	}
	type notNullable struct {
		item
		Note *string `json:"note"`
	}
	type deepPage struct {
		Items  []wrongTypes      `json:"items"`
		Next   string            `json:"next"`
		Last   *missingField     `json:"last"`
		Counts map[string]string `json:"counts,omitempty"`
		Raw    json.RawMessage   `json:"raw,omitempty"`
	}
	type healthAlways struct {
		Status  string            `json:"status"`
		Targets map[string]string `json:"targets"`
		Failed  map[string]string `json:"failed,omitempty"`
	}
	itemSchema := []string{"#/components/schemas/Item"}
	cases := []struct {
		name  string
		body  apitest.Body
		wants []string
	}{
		{"a property Go lacks", apitest.Body{Schemas: itemSchema, Type: reflect.TypeFor[missingField]()},
			[]string{"Item.note: in the document, not in Go (apitest_test.missingField)"}},
		{"a field the document lacks", apitest.Body{Schemas: itemSchema, Type: reflect.TypeFor[extraField]()},
			[]string{"Item.extra: in Go, not in the document"}},
		{"required and optional swapped", apitest.Body{Schemas: itemSchema, Type: reflect.TypeFor[optionalRequired]()},
			[]string{"Item.id: required in the document, omitempty in Go", "Item.note: optional in the document, always sent by Go (no omitempty)"}},
		{"basic types and date-times", apitest.Body{Schemas: itemSchema, Type: reflect.TypeFor[wrongTypes]()},
			[]string{
				"Item.at: the document says a date-time, Go is string, not time.Time",
				"Item.id: the document says integer, Go (float64) is number",
				"Item.kind: the document says string, Go (int) is integer",
			}},
		{"null where the document has none", apitest.Body{Schemas: itemSchema, Type: reflect.TypeFor[notNullable]()},
			[]string{
				"Item.note: Go sends null for nil (a pointer without omitempty), the document does not allow null",
				"Item.note: optional in the document, always sent by Go (no omitempty)",
			}},
		{"inside arrays, choices and maps", apitest.Body{Schemas: []string{"#/components/schemas/Page"}, Type: reflect.TypeFor[deepPage]()},
			[]string{
				"Page.counts{}: the document says object, Go (string) is string",
				"Page.items[].at: the document says a date-time, Go is string, not time.Time",
				"Page.items[].id: the document says integer, Go (float64) is number",
				"Page.items[].kind: the document says string, Go (int) is integer",
				"Page.last.note: in the document, not in Go (apitest_test.missingField)",
			}},
		{"a variant leaves out what Go always sends", apitest.Body{Schemas: []string{
			"#/paths/~1health/get/responses/200/content/application~1json/schema",
			"#/paths/~1health/get/responses/503/content/application~1json/schema",
		}, Type: reflect.TypeFor[healthAlways]()},
			[]string{
				"apitest_test.healthAlways.targets: Go always sends it (no omitempty), an answer of the document leaves it out",
				"apitest_test.healthAlways.targets: optional in the document, always sent by Go (no omitempty)",
			}},
	}
	for _, c := range cases {
		problems, _, err := apitest.CheckBodies([]byte(typesDoc), []apitest.Body{c.body})
		require.NoError(t, err, c.name)
		require.Equal(t, c.wants, problems, c.name)
	}
	_, _, err := apitest.CheckBodies([]byte(typesDoc), []apitest.Body{{Schemas: []string{"#/components/schemas/Nothing"}, Type: reflect.TypeFor[item]()}})
	require.ErrorContains(t, err, "nothing at #/components/schemas/Nothing")
}
