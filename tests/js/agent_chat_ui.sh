#!/usr/bin/env bash
# Builds LangChain's Agent Chat UI, the Vite app `create-agent-chat-app` scaffolds, into
# OUT/dist (static files), for tests/server/test_chat_ui.py. Pinned: the scaffolder's version
# (its template pins @langchain/langgraph-sdk to 0.0.57). Only the web app is installed, not
# the template's LangGraph.js agents; the dependencies its code does not import (a LangGraph.js
# server and CLI, linters) are left out, and `vite build` runs without the type check.
set -euo pipefail
VERSION=0.1.6
out=$(realpath -m "${1:?usage: tests/js/agent_chat_ui.sh OUT_DIR}")
if [ -f "$out/dist/index.html" ]; then exit 0; fi
mkdir -p "$(dirname "$out")"
work=$(mktemp -d "$out.work.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"
npx --yes "create-agent-chat-app@$VERSION" --project-name scaffold --package-manager npm \
  --install-deps false --framework vite --include-agent none > scaffold.log
mv scaffold/apps/web web
rm -rf scaffold  # its workspace root would make npm install the agents too
cd web
node -e '
const fs = require("fs");
const p = JSON.parse(fs.readFileSync("package.json", "utf8"));
for (const d of ["@langchain/langgraph-api", "@langchain/langgraph-cli", "esbuild",
                 "esbuild-plugin-tailwindcss", "prettier"]) delete p.dependencies[d];
for (const d of ["turbo", "eslint", "@eslint/js", "eslint-plugin-react-hooks",
                 "eslint-plugin-react-refresh", "typescript-eslint", "globals"]) delete p.devDependencies[d];
fs.writeFileSync("package.json", JSON.stringify(p, null, 2));
'
npm install --no-audit --no-fund --ignore-scripts --loglevel=error
node_modules/.bin/vite build --logLevel warn
rm -rf "$out"
mkdir -p "$out"
mv dist "$out/dist"
cp package.json "$out/package.json"
node -p 'require("./node_modules/@langchain/langgraph-sdk/package.json").version' > "$out/langgraph-sdk.version"
