"""A question that asks for a kind of value ranks the memories holding one first.

"What port did matlab fail to use?", "which IP did user admin come from?", "what is the name of
the function that rejected user ted?": the question says what its answer looks like (a port, an
address, a function name), as questions to an operator do. A memory without a value of that kind
cannot answer it, however alike it reads: in an sshd session "Invalid user matlab from …" is the
closest line by its words and its embedding, but only "Failed password for invalid user matlab
from … port 46199" holds a port. So, when the question opens by asking for one of these kinds,
the memories holding a value of it come first, in their fused order, then the rest: a
rank-lexicographic rule like `named.named_first`, not a weight to tune.

Only the question's opening counts ("what/which [is the] [name of the] [config] file…"): "why
did the port scan fail" asks for a reason, not a port.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from .fusion import Candidate, lift_by_best


@dataclass(frozen=True)
class AnswerType:
    name: str
    asked: str  # the nouns a question asks for it by (a regex)
    value: re.Pattern[str]  # a value of it in a memory's text


_IPV4 = r"(?<![\d.])\d{1,3}(?:\.\d{1,3}){3}(?![\d.]*\d)"
TYPES = (
    AnswerType("port", r"ports?(?: numbers?)?",
               re.compile(r"\bport:? ?\d{1,5}\b|" + _IPV4 + r":\d{1,5}\b", re.I)),
    # A bare "address" may be a street's: only a network one counts.
    AnswerType("address", r"(?:ip|ipv4)(?: address(?:es)?)?|"
                          r"(?:source|remote|client|server|host|network) address(?:es)?",
               re.compile(_IPV4)),
    # A name in code: a word joined by `_` or `.` to another, called or followed by a colon
    # ("input_userauth_request: …", "NameSystem.addStoredBlock: …", "pam_unix(sshd:auth)").
    AnswerType("function", r"(?:function|method|routine|procedure|handler)s?(?: names?)?",
               re.compile(r"\b[A-Za-z]\w*(?:(?:_|\.)[A-Za-z]\w*)+(?=[:(])")),
    # "Which process…" asks which one: a process is told by its pid ("python (PID 4182)",
    # "sshd[24200]"), not by a unit's "main process exited".
    AnswerType("pid", r"pids?|process(?:es)?(?: ids?| numbers?)?",
               re.compile(r"\[\d+\]|\bpid[ =:]\d+", re.I)),
    AnswerType("path", r"(?:file ?)?paths?|files?|director(?:y|ies)|folders?",
               re.compile(r"(?:^|[\s=:'\"(])(?:~|\.{0,2})/[\w.@+-]+(?:/[\w.@+-]*)*")),
)

_OPENING = (r"^\s*(?:what|which)(?:'s|\s+is|\s+was|\s+are|\s+were|\s+did|\s+does|\s+do)?"
            r"(?:\s+the)?(?:\s+(?:name|number|value|id)s?\s+of(?:\s+the)?)?"
            r"(?:\s+[\w-]+)??\s+(?:{nouns})\b")  # one word may qualify it: "config file"
_ASKED = [(t, re.compile(_OPENING.format(nouns=t.asked), re.I)) for t in TYPES]


def asked_type(query: str) -> AnswerType | None:
    """The kind of value the question opens by asking for, if one of `TYPES`."""
    for t, opening in _ASKED:
        if opening.match(query):
            return t
    return None


def answer_type_first(ranked: Iterable[Candidate], query: str,
                      summary: Callable[[Candidate], str] | None = None) -> list[Candidate]:
    """`ranked` with the memories holding a value of the kind the question asks for first (each
    lifted by the best score, component `answer_type`), sorted; unchanged when it asks for none
    of them or no memory holds one.

    `summary(c)`: the text a value is looked for in, the memory's summary (default: the
    candidate's text). Not its detail: a machine event's detail says where it came from (the log
    file a line was read from, the host), which is no answer to "which file changed?"."""
    cands = list(ranked)
    kind = asked_type(query)
    if kind is None or not cands:
        return cands
    text = summary or (lambda c: c.text)
    holding = [c for c in cands if kind.value.search(text(c) or "")]
    if not holding or len(holding) == len(cands):
        return cands
    held = {id(c) for c in holding}
    return lift_by_best(cands, lambda c: int(id(c) in held), "answer_type")
