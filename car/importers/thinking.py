"""A model's reasoning: kept verbatim with the action that followed it, and said.

Anthropic `thinking` / `redacted_thinking` blocks, OpenAI Responses `reasoning` items, Inspect AI,
OpenTelemetry GenAI and OpenInference `reasoning` content parts, and the reasoning fields
OpenAI-compatible servers add to a chat message (`chat_reasoning`) hold what a model reasoned, often
signed or encrypted so that only the unchanged original is valid when sent back. Importers keep each
piece verbatim, in order, as the `reasoning` of the action it preceded (the readable text joined in
the step's metadata as `thinking`) and warn once per trace (`thinking-not-replayed`): only
`anthropic:` sends reasoning back (the Messages API's own signed blocks, `car.backends.wire.
anthropic_thinking`); any other replayed input lacks reasoning the model saw. Where every call's
recorded input repeats earlier outputs (Inspect, OTel), `SeenReasoning` counts each piece once and
names those no recorded call produced.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from car.importers.base import At, Builder

__all__ = [
    "CHAT_REASONING",
    "SeenReasoning",
    "chat_reasoning",
    "chat_reasoning_sealed",
    "chat_reasoning_texts",
    "not_replayed",
    "thinking_metadata",
]


def thinking_metadata(texts: Sequence[str]) -> dict[str, Any]:
    """Step metadata for one turn's reasoning: its readable `texts` joined as `thinking`, nothing when
    none has any (no empty text pretends there was some). The blocks themselves are the action's
    `reasoning`."""
    return {"thinking": "\n".join(t for t in texts if t)} if any(texts) else {}


# The fields in which OpenAI-compatible servers put an assistant message's reasoning, beside its
# content: DeepSeek and older vLLM write `reasoning_content`; vLLM since late 2025 (both names for a
# while) and OpenRouter `reasoning` (a string); OpenRouter also `reasoning_details` (objects of type
# reasoning.text, reasoning.summary or reasoning.encrypted, to be sent back unchanged and in order);
# LiteLLM `thinking_blocks` (Anthropic's thinking and redacted_thinking blocks, signed); Ollama's
# native messages `thinking` (a string).
CHAT_REASONING = ("reasoning_content", "reasoning", "reasoning_details", "thinking_blocks", "thinking")
_TEXTS = ("text", "summary", "thinking")  # where the structured entries hold readable text
_SEALED = ("reasoning.encrypted", "redacted_thinking")  # the entries that hold encrypted reasoning


def chat_reasoning(message: dict[str, Any], at: At) -> list[tuple[At, dict[str, Any]]]:
    """The reasoning fields of an OpenAI-style chat `message` (at `at`) that hold something, each
    kept verbatim as `{field: value}`, in `CHAT_REASONING` order, with where it sits. A null, an empty
    string or an empty list is no reasoning (vLLM writes `reasoning_content: null`)."""
    return [
        (at / key, {key: message[key]})
        for key in CHAT_REASONING
        if message.get(key) is not None and message.get(key) != "" and message.get(key) != []
    ]


def chat_reasoning_sealed(block: dict[str, Any]) -> bool:
    """Whether a `chat_reasoning` block holds an encrypted entry (reasoning.encrypted,
    redacted_thinking): reasoning nobody can read."""
    return any(isinstance(entry, dict) and entry.get("type") in _SEALED for entry in _entries(block))


def chat_reasoning_texts(blocks: Sequence[dict[str, Any]]) -> list[str]:
    """The readable text of one turn's `chat_reasoning` blocks. Servers write the same reasoning
    under several fields (vLLM both names, OpenRouter the string and its details, LiteLLM the string
    and its blocks), so the string fields are read, each distinct text once; only when none has text
    are the structured entries (text, summary, thinking) read."""
    texts: list[str] = []
    for block in blocks:
        for key in ("reasoning_content", "reasoning", "thinking"):
            text = block.get(key)
            if isinstance(text, str) and text and text not in texts:
                texts.append(text)
    if texts:
        return texts
    for block in blocks:
        for entry in _entries(block):
            if isinstance(entry, dict):
                texts += [entry[f] for f in _TEXTS if isinstance(entry.get(f), str) and entry[f]]
    return texts


def _entries(block: dict[str, Any]) -> list[Any]:
    """The entries of a structured `chat_reasoning` block (reasoning_details, thinking_blocks)."""
    entries = block.get("reasoning_details", block.get("thinking_blocks"))
    return entries if isinstance(entries, list) else []


def not_replayed(seen: Sequence[tuple[At, bool]], noun: str, sealed: str) -> str:
    """The `thinking-not-replayed` message for the pieces `seen` (where each sits, and whether it is
    encrypted): how many `noun`s, how many are encrypted (`sealed` names them: "redacted"), and where
    the first one is."""
    n = len(seen)
    encrypted = sum(unreadable for _, unreadable in seen)
    unreadable = f" ({encrypted} {sealed}: encrypted, unreadable)" if encrypted else ""
    first = seen[0][0].where()
    return (
        f"{n} {noun}{'s' if n != 1 else ''}{unreadable} {'is' if n == 1 else 'are'} kept verbatim "
        f"with {'its action' if n == 1 else 'their actions'} (reasoning); only anthropic: sends "
        "reasoning back (the Messages API's "
        "own signed thinking blocks), other backends rebuild inputs from text and tool calls: the "
        f"model saw that reasoning, their replay does not (first at {first})"
    )


class SeenReasoning:
    """The reasoning pieces of one trace whose recorded inputs repeat earlier outputs: each piece a
    call produced is kept by its step and counted once, where the model wrote it; one only ever seen
    in an input was produced by no recorded call, so no step keeps it. Pieces are the same when their
    JSON is."""

    def __init__(self, *, inputs_kept: bool = False) -> None:
        self.inputs_kept = inputs_kept  # the context messages hold their reasoning (Inspect)
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
            it = "it" if n == 1 else "them"
            where = (
                f"kept only with {'its context message' if n == 1 else 'their context messages'}: "
                f"anthropic: sends {it} back (signed ones) while the recorded context applies; other "
                f"backends, and contexts rebuilt after a changed step, do not"
                if self.inputs_kept
                else "kept nowhere: context messages hold text and tool calls only, so a replay "
                f"does not send {it}"
            )
            said.append(
                f"{n} {noun}{'s' if n != 1 else ''} in recorded inputs that no recorded call "
                f"produced {'is' if n == 1 else 'are'} {where} (first at {first})"
            )
        if said:
            b.warn("thinking-not-replayed", "; ".join(said))


def _canonical(piece: dict[str, Any]) -> str:
    return json.dumps(piece, sort_keys=True, ensure_ascii=False)
