"""The JetStream worker runtime shared by the embedder and the indexer.

- `PullConsumer` / `PullSpec`: a durable pull consumer read in adaptive batches (the workaround
  for FastStream's batch subscriber lives there);
- `WorkerRuntime`: readiness, consumers and background tasks, and the one shutdown sequence;
- `ConcurrentResponder`: a hot request subject answered without FastStream, N at a time;
- `confirm_subscriptions`, `dead_letter_then_ack`, `consumer_backlog`: NATS steps done alike;
- `raw_body`, `json_response`: the FastStream app's decoder and /health answers;
- `start_or_exit`: the `after_startup` hook that ends the process when the start fails (else
  uvicorn serves a /health stuck at "starting"), `EX_SOFTWARE` / `exit_process` for the others.
"""

from .faststream_glue import json_response, raw_body
from .nats_io import confirm_subscriptions, consumer_backlog, dead_letter_then_ack
from .pull import PullConsumer, PullSpec
from .responder import ConcurrentResponder
from .runtime import WorkerRuntime
from .start_or_exit import EX_SOFTWARE, exit_process, start_or_exit

__all__ = [
    "EX_SOFTWARE",
    "ConcurrentResponder",
    "PullConsumer",
    "PullSpec",
    "WorkerRuntime",
    "confirm_subscriptions",
    "consumer_backlog",
    "dead_letter_then_ack",
    "exit_process",
    "json_response",
    "raw_body",
    "start_or_exit",
]
