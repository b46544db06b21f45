"""Template forms: the checks that skip a pattern never change the form, and texts of one
template always share a `template_key`."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st
from totalrecall_schema.templates import (
    exact_form,
    template_form,
    template_hash,
    template_hash_of_form,
    template_key,
)

# The forms as they were first written: every pattern over the whole text, then a regex for
# white space. The module's forms must equal these on every text.
_REFERENCE = [
    re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"),
    re.compile(r"\b\d{4}-\d{2}-\d{2}(?:[tT ]\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?"
               r"(?:[zZ]|[+-]\d{2}:?\d{2})?)?\b"),
    re.compile(r"\b\d{1,2}:\d{2}(?::\d{2})?(?:[.,]\d+)?\b"),
    re.compile(r"\b0x[0-9a-f]+\b"),
    re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,}\b"),
    re.compile(r"-?\d+(?:[.,]\d+)*"),
]
_REPLACE = ["<uuid>", "<ts>", "<time>", "<hex>", "<hex>", "<n>"]


def reference_template_form(text: str) -> str:
    out = text.lower()
    for pattern, repl in zip(_REFERENCE, _REPLACE, strict=True):
        out = pattern.sub(repl, out)
    return re.sub(r"\s+", " ", out).strip()


def reference_exact_form(text: str) -> str:
    out = _REFERENCE[2].sub("<time>", _REFERENCE[1].sub("<ts>", text))
    return re.sub(r"\s+", " ", out).strip()


TEXTS = [
    "",
    "   \t\n ",
    "nginx failed to start",
    "python3 (PID 4182) using 97% CPU",
    "Received block blk_-1608999687919862906 of size 91178 from /10.250.10.6:50010",
    "2026-05-01T12:00:00.123+02:00 sshd[812]: Accepted key for root from 10.0.0.7 port 22",
    "x-2024-01-02 and 12:30:45,5 and 0xDEADbeef and cafe1234f and deadbeefcafe",
    "deadbeef-dead-beef-dead-beefdeadbeef has no digit; abcdef12-3456-7890-abcd-ef1234567890",
    "Arabic-Indic digits ٣٤ and ١٢:٣٠, fullwidth １２３, a no-break\u00a0space, an\u3000ideographic one",
    "the line separator\u2028and file separator\x1c and next line\x85end",
    "-5 degrees, 1,234.5 items, version 3.10.2-rc1",
    "İstanbul KELVIN \u212a 12",
    "literal <n> and <time> already there",
    "I've been listening to a lot of jazz lately, mostly on Spotify, maybe 3 hours a day.",
]


def test_the_forms_equal_the_reference_on_awkward_texts() -> None:
    for text in TEXTS:
        assert template_form(text) == reference_template_form(text), text
        assert exact_form(text) == reference_exact_form(text), text


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("0123456789abcdefxzTZ:-.,+ /_<>\t\n\u00a0٣ghz")),
               max_size=60))
def test_the_forms_equal_the_reference_on_any_text(text: str) -> None:
    assert template_form(text) == reference_template_form(text)
    assert exact_form(text) == reference_exact_form(text)


def test_texts_of_one_template_share_a_key() -> None:
    pairs = [
        ("python3 (PID 4182) using 97% CPU", "python3 (PID 5120) using 3.5% CPU"),
        ("PacketResponder 1 for block blk_-5623176793330377570 terminating",
         "PacketResponder 0 for block blk_38865049064139660 terminating"),
        ("at 2026-05-01T12:00:00Z job a1b2c3d4e5 took 12:30", "at 2025-01-01 job ffee00112233 took 1:05"),
        ("port\u00a042 open", "port 7 open"),
        ("uuid deadbeef-dead-beef-dead-beefdeadbeef", "uuid 12345678-1234-1234-1234-123456789abc"),
        ("١٢ errors", "12 errors"),
    ]
    for a, b in pairs:
        assert template_form(a) == template_form(b), (a, b)
        assert template_key(a) == template_key(b), (a, b)


_WORDS = st.sampled_from(["port", "user", "blk_", "failed", "from", " ", "/", ":", "-", "(",
                          "Ｋ", "\u00a0", "x", "é"])
_VALUES = st.one_of(
    st.integers(-10**12, 10**12).map(str),
    st.floats(0, 1e6, allow_nan=False).map(lambda f: f"{f:.2f}"),
    st.binary(min_size=4, max_size=8).map(lambda b: b.hex()),
    st.uuids().map(str),
    st.datetimes().map(lambda d: d.isoformat()),
    st.times().map(lambda t: t.strftime("%H:%M:%S")),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(_WORDS, st.just(None)), min_size=1, max_size=8), st.data())
def test_a_key_never_parts_texts_of_one_template(shape: list[str | None], data: st.DataObject
                                                ) -> None:
    """Texts made from one shape, each value slot filled at random: where their forms are
    equal, so are their keys."""
    texts = ["".join(part if part is not None else data.draw(_VALUES) for part in shape)
             for _ in range(4)]
    by_form: dict[str, set[str]] = {}
    for t in texts:
        by_form.setdefault(template_form(t), set()).add(template_key(t))
    assert all(len(keys) == 1 for keys in by_form.values())


def test_keys_tell_prose_apart_and_the_hash_of_a_form_is_the_hash() -> None:
    a = "I've been listening to a lot of jazz lately, mostly on Spotify."
    b = "I've been using Netflix a lot lately, mostly for documentaries."
    assert template_key(a) != template_key(b)
    assert template_hash_of_form(template_form(a)) == template_hash(a)
    assert template_hash_of_form(template_form(a), template_form(b)) == template_hash(a, b)
