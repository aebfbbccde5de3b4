#!/usr/bin/env bash
# Makes the sample transcripts of this directory again from scratch: installs
# the Claude Code CLI from npm into a cache directory, then runs it, offline,
# against the scripted Anthropic upstream of internal/transcripts (see
# README.md). Needs npm and Go; nothing else is reached over the network.
#
#   testdata/claude-code/make.sh [NAME]     # NAME: short, tool_heavy, subagent or long; all when none
#
# CLAUDE_CODE_CACHE (default ~/.cache/mnemos/claude-code) keeps the CLI
# between runs; KEEP=1 keeps each run's temporary directory with the calls
# the upstream received.
set -euo pipefail
version=2.1.328
cache="${CLAUDE_CODE_CACHE:-$HOME/.cache/mnemos/claude-code}/$version"
root="$(cd "$(dirname "$0")/../.." && pwd)"
claude="$cache/node_modules/@anthropic-ai/claude-code/bin/claude.exe"
if [ ! -x "$claude" ]; then
  mkdir -p "$cache"
  npm install --prefix "$cache" --no-audit --no-fund "@anthropic-ai/claude-code@$version"
fi
"$claude" --version
cd "$root"
args=(-claude "$claude" -out testdata/claude-code)
[ -n "${1:-}" ] && args+=(-only "$1")
[ -n "${KEEP:-}" ] && args+=(-keep)
go run ./internal/transcripts "${args[@]}"
