package turn

import (
	"bytes"
	"encoding/json"
)

// smallObject is how many keys an object holds before its keys are tracked
// in a map: most objects of an event have a handful, which a linear scan
// checks without allocating; an object with thousands of keys (a tool's
// input can hold anything) must not cost the square of its size.
const smallObject = 16

// DuplicateKey returns the byte offset of the first object key in data that
// repeats a key of the same object, and that key; the offset is -1 when no
// object repeats a key. data must be valid JSON (json.Valid). Keys are
// compared as encoding/json reads them: "a" and "\u0061" are the same key.
//
// encoding/json keeps the last of two equal keys while other parsers keep
// the first, so one event could mean two things to two readers.
func DuplicateKey(data []byte) (int, string) {
	type object struct {
		first   int // index of the object's first key in keys
		wantKey bool
		set     map[string]struct{} // past smallObject keys
	}
	var stack []object
	var keys [][]byte // the keys of every open object, innermost last
	inObject := func() bool { return len(stack) > 0 && stack[len(stack)-1].first >= 0 }
	for i := 0; i < len(data); i++ {
		switch data[i] {
		case '{':
			stack = append(stack, object{first: len(keys), wantKey: true})
		case '[':
			stack = append(stack, object{first: -1}) // an array holds no keys
		case '}', ']':
			if n := len(stack); n > 0 {
				if top := stack[n-1]; top.first >= 0 {
					keys = keys[:top.first]
				}
				stack = stack[:n-1]
			}
		case ',':
			if inObject() {
				stack[len(stack)-1].wantKey = true
			}
		case '"':
			end, escaped := stringEnd(data, i)
			if end < 0 {
				return -1, "" // not valid JSON: json.Valid refuses it first
			}
			if inObject() && stack[len(stack)-1].wantKey {
				top := &stack[len(stack)-1]
				top.wantKey = false
				key := data[i+1 : end]
				if escaped {
					var s string
					if err := json.Unmarshal(data[i:end+1], &s); err == nil {
						key = []byte(s)
					}
				}
				own := keys[top.first:]
				if top.set == nil && len(own) < smallObject {
					for _, k := range own {
						if bytes.Equal(k, key) {
							return i, string(key)
						}
					}
				} else {
					if top.set == nil {
						top.set = make(map[string]struct{}, 2*smallObject)
						for _, k := range own {
							top.set[string(k)] = struct{}{}
						}
					}
					if _, seen := top.set[string(key)]; seen {
						return i, string(key)
					}
					top.set[string(key)] = struct{}{}
				}
				keys = append(keys, key)
			}
			i = end
		}
	}
	return -1, ""
}

// stringEnd returns the offset of the quote that closes the string opening
// at data[start] (-1 when none does), and whether the string holds an escape.
func stringEnd(data []byte, start int) (int, bool) {
	escaped := false
	for j := start + 1; j < len(data); {
		q := bytes.IndexByte(data[j:], '"') // long strings: the plain bytes are skipped in bulk
		if q < 0 {
			return -1, escaped
		}
		b := bytes.IndexByte(data[j:j+q], '\\')
		if b < 0 {
			return j + q, escaped
		}
		escaped = true
		j += b + 2 // the escape and the byte it escapes
	}
	return -1, escaped
}
