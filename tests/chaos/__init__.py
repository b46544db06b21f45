"""`make chaos`: the whole stack (as `make run` starts it) under faults and hostile input.

Each row of docs/reliability.md is one module `test_<row>.py`; it records its outcome with
`report.record(...)` and `python -m tests.chaos.report` turns the results into the table.
"""
