# Total Recall — the commands people and checks rely on.
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.bootstrapped
PYPROJECTS := $(wildcard libs/*/pyproject.toml cli/pyproject.toml services/*/pyproject.toml integrations/*/pyproject.toml) requirements-dev.txt eval/requirements.txt

.PHONY: bootstrap run test test-plugin test-unit test-integration test-e2e chaos bench bench-peers eval lint typecheck compose-check compose-smoke fleet-smoke clean

bootstrap: $(STAMP)

$(STAMP): $(PYPROJECTS) scripts/bootstrap.sh
	./scripts/bootstrap.sh
	touch $(STAMP)

## run: the whole stack locally (nats-server, Postgres, 4 services). Ctrl-C stops everything.
run: bootstrap
	$(BIN)/totalrecall run

## test: every test (unit, integration against real servers, end-to-end, the OpenClaw plugin's)
test: bootstrap test-plugin
	$(BIN)/pytest

test-plugin:
	cd integrations/openclaw && npm ci --no-audit --no-fund && npm test

test-unit: bootstrap
	$(BIN)/pytest tests/unit

test-integration: bootstrap
	$(BIN)/pytest tests/integration

test-e2e: bootstrap
	$(BIN)/pytest tests/e2e

## chaos: the whole stack under faults and hostile input (the full rows of tests/chaos, an
## hour or more), then the table in docs/reliability.md (also when a row fails)
chaos: bootstrap
	$(BIN)/pytest --chaos-full -m chaos --basetemp=$${TMPDIR:-/tmp}/totalrecall-chaos tests/chaos; status=$$?; \
	$(BIN)/python -m tests.chaos.report; exit $$status

## fleet-smoke: many machines, one memory: a 3-node NATS cluster (R3), 3 hosts with their own
## credentials, 2 embedders, 2 indexer partitions, 2 recall APIs; a NATS node, an embedder and
## an indexer killed mid-stream (tests/fleet; ~5 min), then the table in docs/reliability.md
fleet-smoke: bootstrap
	TR_CHAOS_FULL=1 $(BIN)/pytest -p no:cacheprovider tests/fleet; status=$$?; \
	$(BIN)/python -m tests.chaos.report; exit $$status

## bench: performance figures
bench: bootstrap
	$(BIN)/python -m bench $(ARGS)

## bench-peers: Total Recall beside mem0 (local Qdrant, pgvector server), OpenClaw's memory-core
## (hybrid) and plain baselines (0.7·cos+0.3·BM25, bm25s, SQLite FTS5, Postgres FTS): docs/peers.md.
## ARGS="--runs 1" for one run (default 3: median and spread), "--n 5000" for a smaller corpus.
bench-peers: bootstrap
	./bench/peers/setup.sh
	$(BIN)/python -m bench.peers $(ARGS)

## eval: retrieval quality on the benchmark data
eval: bootstrap
	$(BIN)/python -m eval
	$(BIN)/python -m eval.query_map_cv
	$(BIN)/python -c "from eval.report import write_docs; write_docs()"

lint: bootstrap
	$(BIN)/ruff check libs cli services integrations tests bench eval

typecheck: bootstrap
	$(BIN)/mypy libs/schema/totalrecall_schema libs/worker/totalrecall_worker cli/totalrecall libs/client/totalrecall_client integrations/mcp/totalrecall_mcp
	for svc in embedder:totalrecall_embedder indexer:totalrecall_indexer recall-api:totalrecall_recall_api watchers:totalrecall_watchers; do \
	  (cd services/$${svc%%:*} && ../../$(BIN)/mypy --config-file ../../pyproject.toml -p $${svc##*:}) || exit 1; done

## compose-check: validate docker-compose.yml, Prometheus rules, dashboards, systemd, NixOS offline
compose-check: bootstrap
	$(BIN)/pytest tests/unit/deploy tests/integration/deploy

## compose-smoke: build the images and run docker-compose.yml for real with podman (stand-in base
## images from Debian/PyPI, no registry needed): healthchecks, ingest, recall, a restart, down -v
compose-smoke: bootstrap
	$(BIN)/python deploy/compose-smoke/compose_smoke.py

## api-docs: regenerate what is generated from the recall API's OpenAPI schema: docs/api.md, the
## OpenClaw plugin's openapi.json and its src/api-types.ts (tests fail while any of them is stale)
.PHONY: api-docs
api-docs: bootstrap
	$(BIN)/python scripts/api_docs.py
	$(BIN)/python scripts/openapi_schema.py
	cd integrations/openclaw && npm ci --no-audit --no-fund && npm run generate:api-types

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache
