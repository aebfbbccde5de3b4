#!/bin/sh
# Measures what a long replay costs by service: the scripted Messages API
# (go run ./internal/costreplay) as the model, Mnemos (-target=all) on a
# database of its own, `mnemos replay` of the long sample transcript, then
# GET /v1/usage. Needs a local Postgres (trust auth, as for the tests), go
# and jq. Prints the usage by task and in all, as JSON lines.
#
#   sh internal/costreplay/measure.sh [repeat] [tenant settings JSON]
#
# The settings, when given, are the dev tenant's before the replay:
# '{"session_memory": {"enabled": false}}' makes compactions ask the model.
set -eu
REPEAT=${1:-3}
SETTINGS=${2:-}
DB=mnemos_cost_replay
PG=postgres://postgres@127.0.0.1:5432
WORK=$(mktemp -d)
API=http://127.0.0.1:18480
go build -o "$WORK/mnemos" ./cmd/mnemos
go build -o "$WORK/costreplay" ./internal/costreplay
psql "$PG/postgres" -qc "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB" >/dev/null
"$WORK/costreplay" -addr 127.0.0.1:18099 >"$WORK/upstream.log" 2>&1 &
UP=$!
ANTHROPIC_API_KEY=scripted MNEMOS_ANTHROPIC_BASE_URL=http://127.0.0.1:18099 MNEMOS_LLM_MODEL=claude-sonnet-4-5 \
MNEMOS_MIGRATE_DATABASE_URL=$PG/$DB MNEMOS_HTTP_ADDR=127.0.0.1:18480 MNEMOS_ADMIN_ADDR=127.0.0.1:19464 \
MNEMOS_NATS_STORE_DIR="$WORK/nats" MNEMOS_LOG_LEVEL=warn "$WORK/mnemos" -target=all >"$WORK/mnemos.log" 2>&1 &
MN=$!
trap 'kill $MN 2>/dev/null; kill -INT $UP 2>/dev/null; wait; cat "$WORK/upstream.log" >&2; rm -rf "$WORK"' EXIT
until curl -sf $API/readyz >/dev/null; do sleep 1; done
if [ -n "$SETTINGS" ]; then
	MNEMOS_MIGRATE_DATABASE_URL=$PG/$DB "$WORK/mnemos" tenant settings dev "$SETTINGS" >/dev/null
	sleep 31 # the services' settings cache
fi
"$WORK/mnemos" replay --url $API --api-key mnemos-dev-key --session long --repeat "$REPEAT" --until-compact \
	-scope project=cost testdata/claude-code/long.jsonl >&2
# The services finish what the last turns asked for.
sleep 20
K='Authorization: Bearer mnemos-dev-key'
curl -s -H "$K" $API/v1/sessions/long/compactions | jq -c '.compactions[] | {method, pre_tokens, post_tokens}' >&2
curl -s -H "$K" $API/v1/usage | jq -c '.tasks[], {total: .total}'
