#!/usr/bin/env bash
# The official MCP conformance suite (@modelcontextprotocol/conformance, from npm) against
# `lossless mcp --transport http` on a free loopback port: every protocol scenario that
# applies to a server that is not the suite's own fixture. Exits non-zero on any failure.
#
# Not run, and why: the scenarios that call the suite's fixture tools, resources and
# prompts by name (tools-call-simple-text, -image, -audio, -embedded-resource,
# -mixed-content, -with-logging, -with-progress, -sampling, -elicitation,
# json-schema-2020-12, elicitation-sep*, server-sse-polling (its test_reconnection tool),
# resources-read-text, -read-binary, -templates-read, prompts-get-*): lossless serves its
# own (tests/test_server_mcp_more.py covers logging, progress, templates, prompts and
# completions with the official Python client). resources-subscribe/-unsubscribe:
# lossless does not declare the resources.subscribe capability, and answers
# "Method not found" as the spec says for an undeclared one.
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=0.1.12  # 0.1.16 needs Node 22
DEFAULT=(server-initialize ping logging-set-level completion-complete tools-list tools-call-error
           resources-list prompts-list server-sse-multiple-streams dns-rebinding-protection)
read -r -a SCENARIOS <<<"${MCP_SCENARIOS:-${DEFAULT[*]}}"  # MCP_SCENARIOS="a b": run these instead
DIR=.ci/node  # gitignored
mkdir -p "$DIR"
if [ ! -x "$DIR/node_modules/.bin/conformance" ]; then
  npm install --prefix "$DIR" --no-audit --no-fund --loglevel=error "@modelcontextprotocol/conformance@$VERSION"
fi
HOME_DIR=$(mktemp -d)  # a new database: no API key, so the server answers loopback clients without one
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
LOSSLESS_HOME="$HOME_DIR" LOSSLESS_EMBEDDER=none PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" \
  python3 -m lossless mcp --db "$HOME_DIR/conformance.db" --transport http --host 127.0.0.1 --port "$PORT" \
  >"$HOME_DIR/server.log" 2>&1 &
SERVER=$!
trap 'kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; rm -rf "$HOME_DIR"' EXIT
for _ in $(seq 100); do
  python3 -c "import socket; socket.create_connection(('127.0.0.1', $PORT), 0.2).close()" 2>/dev/null && break
  kill -0 "$SERVER" 2>/dev/null || { cat "$HOME_DIR/server.log"; echo "lossless mcp did not start" >&2; exit 1; }
  sleep 0.2
done
failed=()
for scenario in "${SCENARIOS[@]}"; do
  out=$("$DIR/node_modules/.bin/conformance" server --url "http://127.0.0.1:$PORT/mcp" --scenario "$scenario" 2>&1) \
    || true
  summary=$(grep -E '^Passed: ' <<<"$out" | tail -1 || true)
  if [[ "$summary" =~ ^Passed:\ ([0-9]+)/([0-9]+),\ 0\ failed ]] && [ "${BASH_REMATCH[1]}" = "${BASH_REMATCH[2]}" ]; then
    echo "pass  $scenario  ($summary)"
  else
    echo "FAIL  $scenario  (${summary:-no result})"
    grep -E 'FAILURE|Error' <<<"$out" | head -5 | sed 's/^/      /'
    failed+=("$scenario")
  fi
done
if [ "${#failed[@]}" -gt 0 ]; then
  echo "MCP conformance: ${#failed[@]} of ${#SCENARIOS[@]} scenarios failed: ${failed[*]}" >&2
  exit 1
fi
echo "MCP conformance: all ${#SCENARIOS[@]} scenarios passed"
