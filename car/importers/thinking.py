"""A model's reasoning that car's actions cannot carry: kept verbatim in step metadata, and said.

Anthropic `thinking` / `redacted_thinking` blocks, OpenAI Responses `reasoning` items, Inspect AI
and OpenTelemetry GenAI `reasoning` content parts hold what a model reasoned, often signed or
encrypted so that only the unchanged original is valid when sent back. An action holds text and tool
calls only, so a replayed input lacks reasoning the model saw. Importers keep each piece verbatim, in
order, in the metadata of the step that produced it (`thinking_blocks`, and the readable text joined
as `thinking`) and warn once per trace (`thinking-not-replayed`). Where every call's recorded input
repeats earlier outputs (Inspect, OTel), `SeenReasoning` counts each piece once and names those no
recorded call produced.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from car.importers.base import At, Builder

__all__ = ["SeenReasoning", "not_replayed", "thinking_metadata"]


def thinking_metadata(blocks: Sequence[dict[str, Any]], texts: Sequence[str]) -> dict[str, Any]:
    """Step metadata for one turn's reasoning: every block verbatim, in order, and the readable
    `texts` joined, left out when none has any (no empty text pretends there was some)."""
    meta: dict[str, Any] = {"thinking_blocks": list(blocks)}
    if any(texts):
        meta["thinking"] = "\n".join(texts)
    return meta


def not_replayed(seen: Sequence[tuple[At, bool]], noun: str, sealed: str) -> str:
    """The `thinking-not-replayed` message for the pieces `seen` (where each sits, and whether it is
    encrypted): how many `noun`s, how many are encrypted (`sealed` names them: "redacted"), and where
    the first one is."""
    n = len(seen)
    encrypted = sum(unreadable for _, unreadable in seen)
    unreadable = f" ({encrypted} {sealed}: encrypted, unreadable)" if encrypted else ""
    first = seen[0][0].where()
    return (
        f"{n} {noun}{'s' if n != 1 else ''}{unreadable} {'is' if n == 1 else 'are'} kept verbatim in "
        "the steps' metadata (thinking_blocks) but not in replayed inputs, which are rebuilt from text "
        f"and tool calls: the model saw that reasoning, a replay does not (first at {first})"
    )


class SeenReasoning:
    """The reasoning pieces of one trace whose recorded inputs repeat earlier outputs: each piece a
    call produced is kept by its step and counted once, where the model wrote it; one only ever seen
    in an input was produced by no recorded call, so no step keeps it. Pieces are the same when their
    JSON is."""

    def __init__(self) -> None:
        self._kept: dict[str, tuple[At, bool]] = {}  # where each produced piece is; encrypted?
        self._unkept: dict[str, At] = {}  # where each piece seen only in inputs is

    def output(self, at: At, piece: dict[str, Any], encrypted: bool) -> None:
        key = _canonical(piece)
        self._kept.setdefault(key, (at, encrypted))
        self._unkept.pop(key, None)

    def input(self, at: At, piece: dict[str, Any]) -> None:
        key = _canonical(piece)
        if key not in self._kept:
            self._unkept.setdefault(key, at)

    def warn(self, b: Builder, noun: str, sealed: str) -> None:
        """Warn `thinking-not-replayed` about every piece seen, if any (`noun`, `sealed` as in
        `not_replayed`)."""
        said: list[str] = []
        if self._kept:
            said.append(not_replayed(list(self._kept.values()), noun, sealed))
        if self._unkept:
            n = len(self._unkept)
            first = next(iter(self._unkept.values())).where()
            said.append(
                f"{n} {noun}{'s' if n != 1 else ''} in recorded inputs that no recorded call "
                f"produced {'is' if n == 1 else 'are'} kept nowhere: context messages hold text and "
                f"tool calls only, so a replay does not send {'it' if n == 1 else 'them'} (first at "
                f"{first})"
            )
        if said:
            b.warn("thinking-not-replayed", "; ".join(said))


def _canonical(piece: dict[str, Any]) -> str:
    return json.dumps(piece, sort_keys=True, ensure_ascii=False)
