#!/usr/bin/env bash
# Installs LangGraph's JavaScript client, @langchain/langgraph-sdk at the pinned version, into
# OUT (a package.json and its node_modules), for tests/server/test_js_sdk.py. Up to date, this
# reads one file. Quiet: npm's log is shown only if the install fails.
set -euo pipefail
VERSION=1.15.0
out=$(realpath -m "${1:?usage: tests/js/langgraph_sdk.sh OUT_DIR}")
installed="$out/node_modules/@langchain/langgraph-sdk/package.json"
if [ -f "$installed" ] && [ "$(node -p "require('$installed').version")" = "$VERSION" ]; then
  exit 0
fi
mkdir -p "$out"
cat > "$out/package.json" <<JSON
{
  "name": "langgraph-sdk-calls",
  "private": true,
  "type": "module",
  "dependencies": {"@langchain/langgraph-sdk": "$VERSION"}
}
JSON
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! npm install --prefix "$out" --no-audit --no-fund --ignore-scripts --save-exact >"$log" 2>&1; then
  cat "$log" >&2
  echo "tests/js/langgraph_sdk.sh: npm could not install @langchain/langgraph-sdk@$VERSION" >&2
  exit 1
fi
