"""A model's reasoning that car's actions cannot carry: kept verbatim in step metadata, and said.

Anthropic `thinking` / `redacted_thinking` blocks, OpenAI Responses `reasoning` items and Inspect AI
`reasoning` content parts hold what a model reasoned, often signed or encrypted so that only the
unchanged original is valid when sent back. An action holds text and tool calls only, so a replayed
input lacks reasoning the model saw. Importers keep each piece verbatim, in order, in the metadata of
the step that produced it (`thinking_blocks`, and the readable text joined as `thinking`) and warn
once per trace (`thinking-not-replayed`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from car.importers.base import At

__all__ = ["not_replayed", "thinking_metadata"]


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
