#!/usr/bin/env bash
# A venv with docker-compose 1.29 (PyPI) to validate docker-compose.yml offline: no Docker engine
# is needed for `docker-compose config`. PyYAML 5.4.1 needs Cython < 3 to build (infra-probe E).
# Prints the path of the docker-compose binary on stdout (progress goes to stderr).
#
# Where: $COMPOSE_VENV, else ${XDG_CACHE_HOME:-~/.cache}/totalrecall/compose-venv: outside the
# repository, so it survives fresh clones (CI) and `make clean`. Built once (about a minute, needs
# PyPI), then reused. The build runs under a lock and is marked complete only at its end, so
# concurrent test runs neither race nor use a half-built venv (an interrupted build is redone).
set -euo pipefail
DIR=${COMPOSE_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/totalrecall/compose-venv}
DC="$DIR/bin/docker-compose"
MARK="$DIR/.totalrecall-complete"

ready() { [ -f "$MARK" ] && [ -x "$DC" ]; }

if ! ready; then
  mkdir -p "$(dirname "$DIR")"
  exec 9>"$DIR.lock"
  flock 9
  if ! ready; then
    echo "[compose-venv] building docker-compose 1.29.2 in $DIR (once, about a minute)" >&2
    rm -rf "$DIR"
    python3 -m venv "$DIR" >&2
    "$DIR/bin/pip" install -q "cython<3" wheel setuptools >&2
    "$DIR/bin/pip" install -q --no-build-isolation "pyyaml==5.4.1" >&2
    "$DIR/bin/pip" install -q "docker-compose==1.29.2" >&2
    "$DC" version --short >&2
    touch "$MARK"
  fi
fi
echo "$DC"
