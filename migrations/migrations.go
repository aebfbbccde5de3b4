// Package migrations embeds the goose migrations that define the Postgres schema.
package migrations

import "embed"

// FS holds every migration, in goose's numbered-file format.
//
//go:embed *.sql
var FS embed.FS
