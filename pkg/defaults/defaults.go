// Package defaults fills what a caller left unset: the zero fields of a
// configuration struct from its defaults, and a missing meter with one that
// records nothing. Constructors call it once, so every service reads its
// defaults from its DefaultConfig and nowhere else.
package defaults

import (
	"reflect"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// Fill sets every field of *cfg that is zero, or a negative number, to the
// same field of def. Nested structs are filled field by field; slices, maps,
// pointers, funcs and strings are taken from def when empty. Booleans are
// left as they are: false is as much a choice as true.
func Fill[T any](cfg *T, def T) {
	fill(reflect.ValueOf(cfg).Elem(), reflect.ValueOf(def))
}

func fill(v, def reflect.Value) {
	for i := range v.NumField() {
		f, d := v.Field(i), def.Field(i)
		if !f.CanSet() {
			continue
		}
		switch f.Kind() {
		case reflect.Struct:
			if f.Type().PkgPath() == "time" || f.NumField() == 0 { // time.Time and friends are values, not sections
				if f.IsZero() {
					f.Set(d)
				}
				continue
			}
			fill(f, d)
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			if f.Int() <= 0 {
				f.Set(d)
			}
		case reflect.Float32, reflect.Float64:
			if f.Float() <= 0 {
				f.Set(d)
			}
		case reflect.Bool:
		default:
			if f.IsZero() {
				f.Set(d)
			}
		}
	}
}

// Meter returns m, or a meter that records nothing when m is nil.
func Meter(m metric.Meter) metric.Meter {
	if m == nil {
		return noop.NewMeterProvider().Meter("")
	}
	return m
}
