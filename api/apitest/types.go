package apitest

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"
)

// Body pairs a Go type with the schema, or schemas, of the document that
// describe its JSON. Several schemas are variants: answers of one Go type
// that differ by route or status (Health, for /healthz and /readyz), each
// naming some of its fields.
type Body struct {
	// Schemas are JSON pointers into the document
	// ("#/components/schemas/Session").
	Schemas []string
	Type    reflect.Type
}

// CheckBodies compares each body's Go type with its schemas in doc (the
// document as JSON): the JSON field names, which of them are required
// (the Go field has no omitempty) and their basic types (string, integer,
// number, boolean, array, object; date-time strings are time.Time), down
// through nested objects, arrays and maps. It returns what disagrees,
// sorted, and every struct type it compared.
//
// A struct's json tags are its JSON, even when it codes itself (turn.Block
// writes the same fields); a type that codes itself and is not a struct
// (turn.Content, json.RawMessage), or an interface, is not looked into.
// A pointer the encoder sends as null (no omitempty) needs a schema that
// allows null.
func CheckBodies(doc []byte, bodies []Body) (problems []string, checked map[reflect.Type]bool, err error) {
	var root any
	if err := json.Unmarshal(doc, &root); err != nil {
		return nil, nil, fmt.Errorf("apitest: the document: %w", err)
	}
	c := &typeCheck{root: root, checked: map[reflect.Type]bool{}}
	for _, b := range bodies {
		variants := make([]map[string]any, 0, len(b.Schemas))
		for _, p := range b.Schemas {
			s, err := c.at(p)
			if err != nil {
				return nil, nil, err
			}
			variants = append(variants, s)
		}
		name := b.Type.String()
		if len(b.Schemas) == 1 {
			name = strings.TrimPrefix(b.Schemas[0], "#/components/schemas/")
		}
		c.object(name, b.Type, variants)
	}
	slices.Sort(c.problems)
	return slices.Compact(c.problems), c.checked, nil
}

// typeCheck is one CheckBodies: the document and what it found.
type typeCheck struct {
	root     any
	problems []string
	checked  map[reflect.Type]bool
}

func (c *typeCheck) problem(path, format string, args ...any) {
	c.problems = append(c.problems, path+": "+fmt.Sprintf(format, args...))
}

// at is the schema at a JSON pointer ("#/components/schemas/Session").
func (c *typeCheck) at(pointer string) (map[string]any, error) {
	if !strings.HasPrefix(pointer, "#/") {
		return nil, fmt.Errorf("apitest: %q is not a pointer into the document", pointer)
	}
	node := c.root
	for _, tok := range strings.Split(pointer[2:], "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		m, ok := node.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("apitest: the document has nothing at %s", pointer)
		}
		if node, ok = m[tok]; !ok {
			return nil, fmt.Errorf("apitest: the document has nothing at %s", pointer)
		}
	}
	s, ok := node.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("apitest: %s is not a schema", pointer)
	}
	return c.resolve(s), nil
}

// resolve follows s's $ref, if it has one, to the schema it names.
func (c *typeCheck) resolve(s map[string]any) map[string]any {
	for range 32 { // a loop of references ends here
		ref, ok := s["$ref"].(string)
		if !ok {
			return s
		}
		next, err := c.at(ref)
		if err != nil {
			return map[string]any{} // at names no schema: a document the validator refuses
		}
		s = next
	}
	return s
}

// types are the JSON types s allows, null included; any when it does not
// say (an empty schema, or one without a type, enum or const).
func (c *typeCheck) types(s map[string]any) (set map[string]bool, anyType bool) {
	s = c.resolve(s)
	set = map[string]bool{}
	switch t := s["type"].(type) {
	case string:
		set[t] = true
		return set, false
	case []any:
		for _, v := range t {
			if name, ok := v.(string); ok {
				set[name] = true
			}
		}
		return set, false
	}
	if v, ok := s["const"]; ok {
		set[valueType(v)] = true
		return set, false
	}
	if vs, ok := s["enum"].([]any); ok {
		for _, v := range vs {
			set[valueType(v)] = true
		}
		return set, false
	}
	if bs, ok := branches(s); ok {
		for _, b := range bs {
			ts, unsaid := c.types(b)
			if unsaid {
				return nil, true
			}
			maps.Copy(set, ts)
		}
		return set, false
	}
	return nil, true
}

// branches are the schemas s chooses from (anyOf, or oneOf), and whether
// it is a choice.
func branches(s map[string]any) ([]map[string]any, bool) {
	for _, key := range []string{"anyOf", "oneOf"} {
		list, ok := s[key].([]any)
		if !ok {
			continue
		}
		out := make([]map[string]any, 0, len(list))
		for _, b := range list {
			bs, _ := b.(map[string]any)
			out = append(out, bs)
		}
		return out, true
	}
	return nil, false
}

// valueType is the JSON type of a decoded value.
func valueType(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case string:
		return "string"
	case float64:
		if v == float64(int64(v)) {
			return "integer"
		}
		return "number"
	case []any:
		return "array"
	default:
		return "object"
	}
}

var (
	timeType      = reflect.TypeFor[time.Time]()
	marshalerType = reflect.TypeFor[json.Marshaler]()
)

// opaque reports whether t's JSON is not to be read from its Go type: an
// interface, or a type that codes itself and is not a struct.
func opaque(t reflect.Type) bool {
	if t.Kind() == reflect.Interface {
		return true
	}
	codesItself := t.Implements(marshalerType) || reflect.PointerTo(t).Implements(marshalerType)
	return codesItself && t.Kind() != reflect.Struct
}

// goType is the JSON type Go encodes t as.
func goType(t reflect.Type) string {
	if t == timeType {
		return "string"
	}
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "integer"
	case reflect.Float32, reflect.Float64:
		return "number"
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return "string" // base64
		}
		return "array"
	case reflect.Map, reflect.Struct:
		return "object"
	default:
		return t.Kind().String()
	}
}

// value compares the Go type t of a value at path with its schema s.
func (c *typeCheck) value(path string, t reflect.Type, s map[string]any) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if opaque(t) {
		return
	}
	s = c.resolve(s)
	want := goType(t)
	if types, anyType := c.types(s); !anyType {
		delete(types, "null")
		if len(types) != 1 || !types[want] {
			c.problem(path, "the document says %s, Go (%s) is %s", strings.Join(slices.Sorted(maps.Keys(types)), " or "), t, want)
			return
		}
	}
	format, _ := s["format"].(string)
	switch {
	case t == timeType && format != "date-time":
		c.problem(path, "Go is a time.Time, the document's string is not format: date-time")
		return
	case t == timeType:
		return
	case format == "date-time":
		c.problem(path, "the document says a date-time, Go is %s, not time.Time", t)
	}
	switch t.Kind() {
	case reflect.Struct:
		c.object(path, t, []map[string]any{c.objectOf(s)})
	case reflect.Slice, reflect.Array:
		if items, ok := c.objectOf(s)["items"].(map[string]any); ok && want == "array" {
			c.value(path+"[]", t.Elem(), items)
		}
	case reflect.Map:
		c.mapOf(path, t, c.objectOf(s))
	}
}

// objectOf is the branch of s that describes a value, when s is a choice
// of it or null (anyOf: [{$ref: …}, {type: 'null'}]).
func (c *typeCheck) objectOf(s map[string]any) map[string]any {
	bs, _ := branches(s)
	for _, b := range bs {
		b = c.resolve(b)
		if types, _ := c.types(b); !types["null"] || len(types) > 1 {
			return b
		}
	}
	return s
}

// mapOf compares a Go map with an object schema: each named property, and
// additionalProperties, must be of the map's values.
func (c *typeCheck) mapOf(path string, t reflect.Type, s map[string]any) {
	props, _ := s["properties"].(map[string]any)
	for _, name := range slices.Sorted(maps.Keys(props)) {
		p, _ := props[name].(map[string]any)
		c.value(path+"."+name, t.Elem(), p)
	}
	if ap, ok := s["additionalProperties"].(map[string]any); ok {
		c.value(path+"{}", t.Elem(), ap)
	}
}

// field is one JSON field of a Go struct.
type field struct {
	name      string
	typ       reflect.Type
	omitempty bool
}

// fields are the JSON fields of struct t as encoding/json sees them:
// exported fields by their tag's name, the fields of an embedded struct
// without a name promoted, a shallower field hiding a deeper one of the
// same name. embedded are the structs whose fields were promoted.
func fields(t reflect.Type) (out []field, embedded []reflect.Type) {
	seen := map[string]bool{}
	level := []reflect.Type{t}
	for len(level) > 0 {
		var next []reflect.Type
		var found []field
		for _, st := range level {
			for i := range st.NumField() {
				f := st.Field(i)
				tag := f.Tag.Get("json")
				if tag == "-" {
					continue
				}
				name, opts, _ := strings.Cut(tag, ",")
				ft := f.Type
				if f.Anonymous && name == "" {
					for ft.Kind() == reflect.Pointer {
						ft = ft.Elem()
					}
					if ft.Kind() == reflect.Struct {
						next = append(next, ft)
						embedded = append(embedded, ft)
						continue
					}
				}
				if !f.IsExported() {
					continue
				}
				if name == "" {
					name = f.Name
				}
				omit := slices.Contains(strings.Split(opts, ","), "omitempty") || slices.Contains(strings.Split(opts, ","), "omitzero")
				found = append(found, field{name: name, typ: f.Type, omitempty: omit})
			}
		}
		for _, f := range found {
			if !seen[f.name] {
				seen[f.name] = true
				out = append(out, f)
			}
		}
		level = next
	}
	return out, embedded
}

// object compares struct t with its object schemas (variants: see Body).
func (c *typeCheck) object(path string, t reflect.Type, variants []map[string]any) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct {
		c.problem(path, "Go is %s, not a struct", t)
		return
	}
	c.checked[t] = true
	props := make([]map[string]any, len(variants))
	required := make([]map[string]bool, len(variants))
	for i, s := range variants {
		var ok bool
		if props[i], ok = s["properties"].(map[string]any); !ok {
			c.problem(path, "the document names no properties for the Go struct %s", t)
			return
		}
		required[i] = map[string]bool{}
		list, _ := s["required"].([]any)
		for _, r := range list {
			if name, ok := r.(string); ok {
				required[i][name] = true
			}
		}
	}
	inGo := map[string]bool{}
	fs, embedded := fields(t)
	for _, e := range embedded {
		c.checked[e] = true
	}
	for _, f := range fs {
		inGo[f.name] = true
		c.field(path+"."+f.name, f, props, required)
	}
	for i := range variants {
		for _, name := range slices.Sorted(maps.Keys(props[i])) {
			if !inGo[name] {
				c.problem(path+"."+name, "in the document, not in Go (%s)", t)
			}
		}
	}
}

// field compares a struct's field with its property in each variant.
func (c *typeCheck) field(path string, f field, props []map[string]any, required []map[string]bool) {
	if !slices.ContainsFunc(props, func(p map[string]any) bool { return p[f.name] != nil }) {
		c.problem(path, "in Go, not in the document")
		return
	}
	for i := range props {
		p, ok := props[i][f.name].(map[string]any)
		if !ok {
			if !f.omitempty {
				c.problem(path, "Go always sends it (no omitempty), an answer of the document leaves it out")
			}
			continue
		}
		switch req := required[i][f.name]; {
		case req && f.omitempty && len(props) == 1:
			// Variants may require what Go leaves out of another answer.
			c.problem(path, "required in the document, omitempty in Go")
		case !req && !f.omitempty:
			c.problem(path, "optional in the document, always sent by Go (no omitempty)")
		}
		if f.typ.Kind() == reflect.Pointer && !f.omitempty {
			if types, anyType := c.types(p); !anyType && !types["null"] {
				c.problem(path, "Go sends null for nil (a pointer without omitempty), the document does not allow null")
			}
		}
		c.value(path, f.typ, p)
	}
}
