"""`ports.Row` over a `Memory` already built: the memories a store returns built (its `recent`,
which the diagnostic and process-end look-ups read), and stores that hold `Memory` objects."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from totalrecall_schema import Memory


class Built:
    """A built `Memory` as a row; `memory()` gives that same object back."""

    __slots__ = ("_m",)

    def __init__(self, m: Memory) -> None:
        self._m = m

    @property
    def id(self) -> str:
        return self._m.id

    @property
    def namespace(self) -> str:
        return self._m.namespace

    @property
    def timestamp(self) -> datetime:
        return self._m.timestamp

    @property
    def category(self) -> str:
        return self._m.category

    @property
    def subcategory(self) -> str:
        return self._m.subcategory

    @property
    def summary(self) -> str:
        return self._m.summary

    @property
    def detail(self) -> str:
        return self._m.detail

    @property
    def tier(self) -> str:
        return self._m.tier

    @property
    def actor(self) -> str:
        return self._m.actor

    @property
    def severity(self) -> str:
        return self._m.severity

    @property
    def metadata(self) -> Mapping[str, Any]:
        return self._m.metadata

    def memory(self) -> Memory:
        return self._m
