"""The JetStream worker runtime shared by the embedder and the indexer.

- `PullConsumer` / `PullSpec`: a durable pull consumer read in adaptive batches (the workaround
  for FastStream's batch subscriber lives there);
- `WorkerRuntime`: readiness, consumers and background tasks, and the one shutdown sequence;
- `ConcurrentResponder`: a hot request subject answered without FastStream, N at a time;
- `confirm_subscriptions`, `dead_letter_then_ack`, `consumer_backlog`: NATS steps done alike;
- `raw_body`, `json_response`: the FastStream app's decoder and /health answers.
"""

from .faststream_glue import json_response, raw_body
from .nats_io import confirm_subscriptions, consumer_backlog, dead_letter_then_ack
from .pull import PullConsumer, PullSpec
from .responder import ConcurrentResponder
from .runtime import WorkerRuntime

__all__ = [
    "ConcurrentResponder",
    "PullConsumer",
    "PullSpec",
    "WorkerRuntime",
    "confirm_subscriptions",
    "consumer_backlog",
    "dead_letter_then_ack",
    "json_response",
    "raw_body",
]
