"""Retrieval evaluation of Total Recall on LoCoMo and LongMemEval (`make eval`, `python -m eval`).

Every memory goes in through the real `POST /memory/ingest` and every question through the real
`POST /memory/recall`; `eval.offline` re-implements the scoring without the stack for ablations.
"""
