#!/usr/bin/env bash
# A venv with docker-compose 1.29 (PyPI) to validate docker-compose.yml offline: no Docker engine
# is needed for `docker-compose config`. PyYAML 5.4.1 needs Cython < 3 to build (infra-probe E).
# Prints the path of the docker-compose binary.
set -euo pipefail
DIR=${COMPOSE_VENV:-${TOTALRECALL_HOME:-$HOME/.local/share/totalrecall}/.compose-venv}
if [ ! -x "$DIR/bin/docker-compose" ]; then
  python3 -m venv "$DIR" >&2
  "$DIR/bin/pip" install -q "cython<3" wheel setuptools >&2
  "$DIR/bin/pip" install -q --no-build-isolation "pyyaml==5.4.1" >&2
  "$DIR/bin/pip" install -q "docker-compose==1.29.2" >&2
fi
echo "$DIR/bin/docker-compose"
