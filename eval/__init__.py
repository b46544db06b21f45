"""Retrieval evaluation of Total Recall on LoCoMo, LongMemEval and LogQA (`make eval`,
`python -m eval`; the datasets are listed in `eval.registry`).

Every memory goes in through the real `POST /memory/ingest` and every question through the real
`POST /memory/recall`; `eval.offline` re-implements the scoring without the stack for ablations.
"""
