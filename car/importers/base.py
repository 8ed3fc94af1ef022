"""What every importer shares: the file as read (`Document`), located errors (`At`), and `Builder`.

An importer turns one foreign file into car traces. It reports problems as one line naming the file,
the place inside it and what was expected (`At.fail`), never as a traceback, and it says honestly what
the file did not record (`Builder.warn`, the fidelity class).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, NoReturn, Protocol, runtime_checkable

from pydantic import BaseModel, ValidationError

from car.errors import InputError
from car.jsonfile import json_path, loads, not_utf8, read_bytes, shown_json, utf8_text
from car.trace import (
    Action,
    Actor,
    Fidelity,
    FidelityWarning,
    Message,
    Observation,
    Outcome,
    Sampling,
    Source,
    Step,
    ToolCall,
    Trace,
)

__all__ = [
    "MAX_NESTING",
    "At",
    "Builder",
    "Document",
    "Importer",
    "lone_surrogate_at",
    "nested_too_deep",
    "parse_any_arguments",
    "parse_arguments",
    "parse_float",
    "read_document",
    "sampling_from",
    "text_of",
]

Kind = Literal["json", "jsonl", "zip", "other"]
_JSONL_SUFFIXES = frozenset({".jsonl", ".ndjson", ".jsonlines"})

ENVIRONMENT = "environment"  # the tool actor that owns results recorded before any turn

# pydantic writes a free-form JSON value of a trace (tool-call arguments, metadata, a reasoning block,
# a tool definition) nested at most this many objects and arrays deep; a deeper one validates but
# cannot be written ("Maximum serialization depth exceeded"), so importers refuse it where it sits.
MAX_NESTING = 255


@dataclass
class Document:
    """A file read once: its bytes, their hash, and the parsed JSON (or JSON Lines) if it is JSON.

    For JSON Lines `data` is the list of parsed lines and `lines[i]` the 1-based line number of item i,
    so locations read "line 7: $.messages[2]".
    """

    path: str
    raw: bytes
    kind: Kind
    data: Any = None
    lines: list[int] = field(default_factory=list)
    problem: str | None = None  # why the bytes are not JSON, when they are not

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.raw).hexdigest()

    @property
    def at(self) -> At:
        return At(self, ())

    @functools.cached_property
    def may_hold_huge_numbers(self) -> bool:
        """Whether a number in the file may be beyond a double's range (an exponent of three
        digits, or 309 digits in a row); a file read by another library (an Inspect log) may."""
        return self.kind not in ("json", "jsonl") or bool(_HUGE_NUMBER.search(self.raw))

    def source(self, fmt: str, locator: str | None) -> Source:
        return Source(format=fmt, path=utf8_text(self.path), locator=locator, content_hash=self.sha256)


class _Overflow(float):
    """A JSON number too large for a double (`1e400`): infinite to every check an importer makes,
    and remembering the text it was written as, which the trace keeps (JSON has no infinity)."""

    text: str


def parse_float(text: str) -> float:
    """For `json.loads(parse_float=...)`: a number as a double, one out of its range marked."""
    value = float(text)
    if math.isfinite(value):
        return value
    out = _Overflow(value)
    out.text = text
    return out


def _loads(text: str) -> Any:
    return loads(text, parse_float=parse_float)


def read_document(path: str | Path) -> Document:
    """Read a file; parse it as JSON or JSON Lines when it is text. Unreadable files raise InputError."""
    source = str(path)
    raw = read_bytes(path)
    if raw[:4] == b"PK\x03\x04":
        return Document(source, raw, "zip")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        return Document(source, raw, "other", problem=not_utf8(raw, exc.start))
    if not text.strip():
        return Document(source, raw, "other", problem="empty file")
    try:
        return Document(source, raw, "json", _loads(text))
    except json.JSONDecodeError as exc:
        first = exc
    except (ValueError, RecursionError) as exc:
        return Document(source, raw, "other", problem=f"invalid JSON: {exc}")
    items: list[Any] = []
    numbers: list[int] = []
    # A file named as JSON Lines, or whose first record parsed, is JSON Lines with a bad line: the
    # whole-file error would only say "Extra data" where the second record starts.
    lines_intent = Path(source).suffix.lower() in _JSONL_SUFFIXES
    # Only "\n" ends a JSON Lines record: U+2028, U+0085 and friends may sit raw inside a string.
    for n, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            items.append(_loads(line))
        except (ValueError, RecursionError) as exc:
            if isinstance(exc, json.JSONDecodeError) and (items or lines_intent):
                where, msg = f"line {n} column {exc.colno}", exc.msg
            elif items or lines_intent:  # NaN or Infinity, or nested too deep: no column
                where, msg = f"line {n}", str(exc)
            else:  # not JSON Lines either: the whole-file error is the likelier intent
                where, msg = f"line {first.lineno} column {first.colno}", first.msg
            return Document(source, raw, "other", problem=f"{where}: invalid JSON: {msg}")
        numbers.append(n)
    if len(items) < 2:
        where = f"line {first.lineno} column {first.colno}"
        return Document(source, raw, "other", problem=f"{where}: invalid JSON: {first.msg}")
    return Document(source, raw, "jsonl", items, numbers)


def describe(value: Any) -> str:
    """A short phrase for what a JSON value is, for "expected X, got Y" messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        shown = shown_json(value)
        return f"the string {shown[:40] + '…' if len(shown) > 40 else shown}"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


@dataclass(frozen=True)
class At:
    """A place inside a document, for one-line errors: `At.fail("a string", got)`."""

    doc: Document
    loc: tuple[str | int, ...]

    def __truediv__(self, part: str | int) -> At:
        return At(self.doc, (*self.loc, part))

    def where(self) -> str:
        if self.doc.kind == "jsonl" and self.loc and isinstance(self.loc[0], int):
            index = self.loc[0]
            line = self.doc.lines[index] if index < len(self.doc.lines) else index + 1
            return f"line {line}: {json_path(self.loc[1:])}"
        return json_path(self.loc)

    def fail(self, expected: str, got: Any = ..., *, detail: str | None = None) -> NoReturn:
        """Refuse the value `got` found here: "expected X, got Y". A None for a key the document
        does not hold (`dict.get` of a missing key) is said to be missing, not null."""
        if got is None and self._absent():
            msg = f"{self.doc.path}: {self.where()}: missing; expected {expected}"
        else:
            msg = f"{self.doc.path}: {self.where()}: expected {expected}"
            if got is not ...:
                msg += f", got {describe(got)}"
        if detail:
            msg += f" ({detail})"
        raise InputError(msg)

    def _absent(self) -> bool:
        """Whether this place is a key its object in the document lacks, looking into JSON text
        where the place goes on inside a string (OTel message content). A place the parsed document
        does not show (in a log another library read) is not known to be absent."""
        if not self.loc or not isinstance(self.loc[-1], str):
            return False
        node = self.doc.data
        for part in self.loc[:-1]:
            if isinstance(node, str):
                try:
                    node = _loads(node)
                except (ValueError, RecursionError):
                    return False
            listed = isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node)
            if not (listed or (isinstance(node, dict) and part in node)):
                return False
            node = node[part]
        return isinstance(node, dict) and self.loc[-1] not in node

    # -- typed access: each returns the value or fails naming this place ----------------------
    def obj(self, value: Any, what: str = "an object") -> dict[str, Any]:
        if not isinstance(value, dict):
            self.fail(what, value)
        return value

    def arr(self, value: Any, what: str = "an array") -> list[Any]:
        if not isinstance(value, list):
            self.fail(what, value)
        return value

    def string(self, value: Any, what: str = "a string") -> str:
        if not isinstance(value, str):
            self.fail(what, value)
        return value

    def opt_string(self, value: Any, what: str = "a string") -> str | None:
        return None if value is None else self.string(value, what)

    def call_id(self, value: Any, what: str = "a tool-call id") -> str:
        """A tool-call id as text. Some frameworks number their calls (`"id": 17`): an integer is
        read as its decimal string on the call and on the result side alike, so the two still pair.
        A boolean (an int to Python) or a fraction is no id."""
        expected = f"{what} (a string or an integer)"
        if isinstance(value, bool):
            self.fail(expected, value)
        if isinstance(value, int):
            return str(value)
        if isinstance(value, float):
            self.fail(expected, value, detail=f"{value!r} is not an integer")
        return self.string(value, expected)


def parse_arguments(value: Any, at: At) -> tuple[dict[str, Any], str | None]:
    """Tool-call arguments as (parsed object, exact recorded string).

    A string that is not a JSON object is kept verbatim under `_unparsed`, so two different malformed
    calls never look identical to replay. Arguments nested deeper than car can write are refused.
    """
    if value is None:
        return {}, None
    if isinstance(value, dict):
        return _writable(value, at), None
    if isinstance(value, str):
        if not value.strip():
            return {}, value
        try:
            parsed = _loads(value)
        except (ValueError, RecursionError):
            return {"_unparsed": value}, value
        if isinstance(parsed, dict):
            return _writable(parsed, at), value
        return {"_unparsed": value}, value
    at.fail("tool-call arguments as a JSON object or a JSON string", value)


def _writable(arguments: dict[str, Any], at: At) -> dict[str, Any]:
    depth = nesting(arguments)
    if depth > MAX_NESTING:
        at.fail(
            f"tool-call arguments nested at most {MAX_NESTING} levels deep",
            detail=f"they are nested {depth} levels deep, which car cannot write",
        )
    return arguments


def nesting(value: Any) -> int:
    """How many objects and arrays deep `value` is nested (0 for a string or a number)."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        deepest = max(deepest, depth)
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list | tuple))
    return deepest


def nested_too_deep(value: Any, path: str = "$") -> tuple[str, int] | None:
    """The first free-form JSON value inside `value` (a trace, or a part of one) nested deeper than
    car can write (`MAX_NESTING`), as its JSON path from `path` and its depth; None if there is none.
    Each value of a field (or each item of a field that is a tuple) counts on its own, as pydantic's
    serializer counts them."""
    if isinstance(value, BaseModel):
        for name, info in type(value).model_fields.items():
            found = nested_too_deep(getattr(value, name), f"{path}.{info.alias or name}")
            if found is not None:
                return found
        return None
    if isinstance(value, tuple):
        for i, item in enumerate(value):
            found = nested_too_deep(item, f"{path}[{i}]")
            if found is not None:
                return found
        return None
    if isinstance(value, dict | list):
        depth = nesting(value)
        return (path, depth) if depth > MAX_NESTING else None
    return None


def parse_any_arguments(value: Any, at: At) -> tuple[dict[str, Any], str | None]:
    """`parse_arguments` for formats whose arguments are a JSON value, not a string (Anthropic's
    `input`, the GenAI conventions' `arguments`): any other value (a list, a number) is kept by the
    same rule as its JSON text, under `_unparsed`, and that text is the recorded string."""
    if not (isinstance(value, dict | str) or value is None):
        value = json.dumps(value)
    return parse_arguments(value, at)


def text_of(value: Any, at: At) -> str:
    """Message content as text: a string, or a list of text parts joined (other parts are skipped)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        out: list[str] = []
        for i, part in enumerate(value):
            if isinstance(part, str):
                out.append(part)
            elif isinstance(part, dict):
                for key in ("text", "content", "refusal"):
                    if isinstance(part.get(key), str):
                        out.append(part[key])
                        break
            else:
                (at / i).fail("a content part (an object or a string)", part)
        return "\n".join(out)
    if isinstance(value, dict) and isinstance(value.get("text"), str):
        return str(value["text"])
    at.fail("message content as a string or a list of parts", value)


_SAMPLING_KEYS = ("model", "temperature", "top_p", "seed", "max_tokens")
# Newer OpenAI APIs name the output-token limit differently (Chat: max_completion_tokens; Responses:
# max_output_tokens); it is the same limit.
_MAX_TOKENS = ("max_tokens", "max_completion_tokens", "max_output_tokens")


def api_model(name: Any, providers: frozenset[str], compatible: str | None = None) -> Any:
    """A model named `provider/model` by a harness (Inspect, LiteLLM) as its API knows it:
    `openai/gpt-4o` is `gpt-4o`, `openrouter/anthropic/claude-x` is `anthropic/claude-x` (one
    provider off), and `COMPATIBLE/service/model` is `model`. A name whose first part is no provider
    of `providers` is kept as it is (`meta-llama/Llama-3` is a model id)."""
    if not isinstance(name, str):
        return name
    provider, _, rest = name.partition("/")
    if compatible is not None and provider == compatible and "/" in rest:
        return rest.partition("/")[2] or name
    return rest if provider in providers and rest else name


def sampling_from(values: dict[str, Any]) -> tuple[Sampling | None, list[str]]:
    """Sampling parameters from a mapping; values of the wrong type are dropped and named."""
    kept: dict[str, Any] = {}
    dropped: list[str] = []
    for key in _SAMPLING_KEYS:
        if key == "max_tokens":
            v = next((values[k] for k in _MAX_TOKENS if values.get(k) is not None), None)
        else:
            v = values.get(key)
        if v is None:
            continue
        if isinstance(v, str) and key != "model":
            try:
                v = float(v) if key in ("temperature", "top_p") else int(v)
            except ValueError:
                dropped.append(key)
                continue
        try:
            Sampling.model_validate({key: v})
        except ValidationError:
            dropped.append(key)
            continue
        kept[key] = v
    thinking = _thinking_settings(values)
    if thinking is not None:
        kept["thinking"] = thinking
    elif values.get("thinking") is not None:
        dropped.append("thinking")
    return (Sampling.model_validate(kept) if kept else None), dropped


def _thinking_settings(values: dict[str, Any]) -> dict[str, Any] | None:
    """The recorded thinking settings: an Anthropic request's `thinking` object as is, else an
    Inspect AI config's `reasoning_tokens` as the extended-thinking budget it sets."""
    thinking = values.get("thinking")
    if isinstance(thinking, dict) and isinstance(thinking.get("type"), str):
        return dict(thinking)
    budget = values.get("reasoning_tokens")
    if isinstance(budget, int) and not isinstance(budget, bool) and budget > 0:
        return {"type": "enabled", "budget_tokens": budget}
    return None


@runtime_checkable
class Importer(Protocol):
    """A plugin that converts one foreign format (entry-point group `car.importers`).

    `sniff` must be cheap and must not raise: it sees the parsed JSON (None for binary files) and the
    path. `convert` returns one trace per run in the file and raises `InputError` for bad input.
    """

    name: str
    description: str

    def sniff(self, data: Any, path: str) -> bool: ...

    def convert(self, doc: Document) -> list[Trace]: ...


class Builder:
    """Assembles one trace: actors, steps, observations attached to the step that made the call."""

    def __init__(self, doc: Document, fmt: str) -> None:
        self.doc = doc
        self.fmt = fmt
        self._actors: dict[str, dict[str, Any]] = {}
        self._steps: list[dict[str, Any]] = []
        self._call_step: dict[str, int] = {}
        self._same_id: dict[tuple[int, str], list[str]] = {}  # (step, recorded id) -> ids it got
        self._warnings: dict[str, str] = {}

    # -- actors and steps -------------------------------------------------------------------------
    def actor(
        self,
        actor_id: str,
        kind: str = "agent",
        *,
        system_prompt: str | None = None,
        tools: Sequence[dict[str, Any]] = (),
        stochastic: bool | None = None,
    ) -> str:
        a = self._actors.setdefault(actor_id, {"id": actor_id, "kind": kind})
        if system_prompt and not a.get("system_prompt"):
            a["system_prompt"] = system_prompt
        if tools and not a.get("tools"):
            a["tools"] = list(tools)
        if stochastic is not None:
            a["stochastic"] = stochastic
        return actor_id

    def add_system_prompt(self, actor_id: str, text: str) -> None:
        """Add one more leading system message to the actor's prompt: several are joined by a blank
        line, so none is lost."""
        a = self._actors.setdefault(actor_id, {"id": actor_id, "kind": "agent"})
        if text:
            a["system_prompt"] = f"{a['system_prompt']}\n\n{text}" if a.get("system_prompt") else text

    def step(
        self,
        actor: str,
        text: str = "",
        tool_calls: Sequence[ToolCall] = (),
        *,
        context: Sequence[Message] | None = None,
        sampling: Sampling | None = None,
        metadata: dict[str, Any] | None = None,
        reasoning: Sequence[dict[str, Any]] = (),
    ) -> int:
        if actor not in self._actors:
            self.actor(actor)
        index = len(self._steps)
        calls: list[ToolCall] = []
        for call in tool_calls:
            recorded = call.id
            if any(c.id == call.id for c in calls):
                # Within one action a result could not tell two calls apart: make the id unique.
                call = call.model_copy(update={"id": f"{call.id}#{len(calls)}"})
                self.warn(
                    "duplicate-call-id",
                    "an action repeats a tool-call id; the repeats got a #N suffix and the results "
                    "with that id answer them in order",
                )
            self._same_id.setdefault((index, recorded), []).append(call.id)
            calls.append(call)
            # Some providers reuse ids across turns: a result answers the latest call with its id.
            self._call_step[call.id] = index
        self._steps.append(
            {
                "actor": actor,
                "action": Action(text=text, tool_calls=tuple(calls), reasoning=tuple(reasoning)),
                "observations": [],
                "context": tuple(context) if context is not None else "prefix",
                "sampling": sampling,
                "metadata": dict(metadata or {}),
            }
        )
        return index

    @property
    def n_steps(self) -> int:
        return len(self._steps)

    def observe(self, call_id: str | None, content: str, *, is_error: bool = False) -> bool:
        """Attach a tool result to the step that made the call; False if no step made it.

        When that step repeated the id (renamed `id#N`), results answer its calls in order.
        """
        if call_id is not None and call_id in self._call_step:
            index = self._call_step[call_id]
            observations = self._steps[index]["observations"]
            ids = self._same_id.get((index, call_id), [call_id])
            answered = {o.call_id for o in observations}
            target = next((i for i in ids if i not in answered), ids[0])
            observations.append(Observation(call_id=target, content=content, is_error=is_error))
            return True
        if call_id is None and self._steps:
            self._steps[-1]["observations"].append(Observation(content=content, is_error=is_error))
            return True
        return False

    def observe_orphan(self, call_id: str, content: str, *, is_error: bool = False) -> None:
        """A tool result whose call is not in the record: keep it, unkeyed, on the latest step (before
        the first turn, on a step of the tool actor `environment`)."""
        where = "the step before it"
        if not self._steps:
            self.actor(ENVIRONMENT, "tool")
            self.step(ENVIRONMENT)
            where = f"a step of the tool actor {ENVIRONMENT!r} (it precedes every turn)"
        self.warn(
            "orphan-tool-result",
            f"a tool result for call {call_id!r} matches no recorded call; kept as a plain "
            f"observation of {where}",
        )
        self._steps[-1]["observations"].append(Observation(content=content, is_error=is_error))

    def warn(self, code: str, message: str) -> None:
        self._warnings.setdefault(code, message)

    def attachments(self, what: str, at: At) -> None:
        """Say that `what` (images, files, ...) were not imported, naming where the first one sits
        (`at`): the trace keeps their messages' text only."""
        self.warn(
            "attachments-unresolved", f"{what} were not imported (text only; first at {at.where()})"
        )

    # -- the trace ---------------------------------------------------------------------------------
    def build(
        self,
        *,
        trace_id: str,
        fidelity: Literal["A", "B", "C"],
        locator: str | None,
        at: At,
        task: str | dict[str, Any] = "",
        outcome: Outcome | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> Trace:
        if not self._steps:
            at.fail("at least one turn (message or model call)", detail="found none to import")
        deciders = [
            s
            for s in self._steps
            if self._actors[s["actor"]].get("stochastic", self._actors[s["actor"]]["kind"] == "agent")
        ]
        if deciders and all(s["sampling"] is None for s in deciders):
            self.warn(
                "sampling-missing",
                "no sampling parameters (model, temperature, seed) were recorded; replay uses the "
                "policy's defaults",
            )
        steps = [
            Step(
                index=i,
                actor=s["actor"],
                context=s["context"],
                action=s["action"],
                observations=tuple(s["observations"]),
                sampling=s["sampling"],
                metadata=s["metadata"],
            )
            for i, s in enumerate(self._steps)
        ]
        try:
            trace = Trace(
                # importers name runs after their file: a name that is not UTF-8 is shown escaped
                id=utf8_text(trace_id) if trace_id else "trace",
                task=task,
                actors=tuple(Actor.model_validate(a) for a in self._actors.values()),
                steps=tuple(steps),
                outcome=outcome or Outcome(),
                metadata=metadata or {},
                source=self.doc.source(self.fmt, locator),
                fidelity=Fidelity(
                    class_=fidelity,
                    warnings=tuple(
                        FidelityWarning(code=c, message=m) for c, m in self._warnings.items()
                    ),
                ),
            )
        except (ValidationError, ValueError) as exc:
            # Importers check their input first; this is the backstop that keeps it to one line.
            at.fail("a run car can represent", detail=" ".join(str(exc).split())[:200])
        try:  # written in Rust (a few percent of an import): a value too deep to write fails here
            trace.model_dump_json()
        except ValueError:  # too deep, or a lone surrogate (replaced below)
            deep = nested_too_deep(trace)  # metadata, reasoning, tool definitions: none checked
            if deep is not None:
                at.fail(
                    "a run car can write",
                    detail=f"the value at {deep[0]} of the trace is nested {deep[1]} levels deep; "
                    f"car writes at most {MAX_NESTING}",
                )
        return self._numbers_as_text(self._without_lone_surrogates(trace))

    def _without_lone_surrogates(self, trace: Trace) -> Trace:
        """Replace lone UTF-16 surrogates (valid JSON escapes, not text UTF-8 can encode) with U+FFFD.

        Decoded UTF-8 text holds none, so only a file with a `\\uD800`-`\\uDFFF` escape (at any depth
        of JSON inside strings) or a binary file is searched.
        """
        if self.doc.kind in ("json", "jsonl") and not _SURROGATE_ESCAPE.search(self.doc.raw):
            return trace
        return _rewritten(
            trace,
            _replace_surrogates,
            "invalid-unicode",
            lambda places: (
                f"{len(places)} text value{'s' if len(places) != 1 else ''} held a lone UTF-16 "
                "surrogate (half of a character, such as an emoji cut in two), which UTF-8 cannot "
                f"encode; each was replaced with U+FFFD (first at {json_path(places[0])} of the trace)"
            ),
        )

    def _numbers_as_text(self, trace: Trace) -> Trace:
        """Keep numbers a trace file cannot hold (`1e400` is infinite as a double; NaN and Infinity,
        which JSON text inside a string may hold; JSON has neither, so they were written as null) as
        their recorded text, a string, and say so.

        Only a file that may hold one is searched (`Document.may_hold_huge_numbers`, or a NaN or
        Infinity literal in its text).
        """
        if not (self.doc.may_hold_huge_numbers or _NOT_FINITE.search(self.doc.raw)):
            return trace
        return _rewritten(trace, _numbers_to_text, "number-out-of-range", _numbers_kept)


def _rewritten(
    trace: Trace,
    rewrite: Callable[[Any, tuple[str | int, ...], list[Any]], Any],
    code: str,
    message: Callable[[list[Any]], str],
) -> Trace:
    """`trace` with every value `rewrite` changes changed (it notes each place it changes), and a
    warning `code` saying so: `message(the places noted)`; `trace` itself when none is."""
    places: list[Any] = []
    data = rewrite(trace.model_dump(by_alias=True), (), places)
    if not places:
        return trace
    data["fidelity"]["warnings"].append({"code": code, "message": message(places)})
    return Trace.model_validate(data)


def _numbers_kept(places: list[tuple[tuple[str | int, ...], str]]) -> str:
    """What `_numbers_to_text` did, from its places: (where, the recorded text)."""
    literals = sum(text in _LITERALS for _, text in places)
    huge = len(places) - literals
    what = []
    if huge:
        what.append(f"{huge} number{'s' if huge != 1 else ''} beyond the range of a double (1e400)")
    if literals:
        what.append(
            f"{literals} NaN or Infinity value{'s' if literals != 1 else ''} (not JSON numbers, "
            "though Python's json module writes them)"
        )
    return (
        f"{' and '.join(what)}, which a trace file cannot hold (JSON has no infinity or NaN); each "
        f"is kept as its recorded text, a string (first at {json_path(places[0][0])} of the trace)"
    )


def _numbers_to_text(value: Any, loc: tuple[str | int, ...], places: list[Any]) -> Any:
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        if isinstance(value, _Overflow):
            text = value.text
        else:
            text = "NaN" if math.isnan(value) else ("-Infinity" if value < 0 else "Infinity")
        places.append((loc, text))
        return text
    if isinstance(value, dict):
        return {k: _numbers_to_text(v, (*loc, k), places) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_numbers_to_text(v, (*loc, i), places) for i, v in enumerate(value)]
    return value


_HUGE_NUMBER = re.compile(rb"[eE][+-]?0*[1-9][0-9]{2}|[0-9]{309}")
_LITERALS = ("NaN", "Infinity", "-Infinity")  # Python's json module writes and reads them
_NOT_FINITE = re.compile(rb"NaN|Infinity")
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def lone_surrogate_at(trace: Trace) -> str | None:
    """The JSON path of the first text value in `trace` holding a lone UTF-16 surrogate, or None."""
    places: list[tuple[str | int, ...]] = []
    _replace_surrogates(trace.model_dump(by_alias=True, exclude_defaults=True), (), places)
    return json_path(places[0]) if places else None


def _replace_surrogates(value: Any, loc: tuple[str | int, ...], places: list[Any]) -> Any:
    if isinstance(value, str):
        if _SURROGATE.search(value):
            places.append(loc)
            return _SURROGATE.sub("\ufffd", value)
        return value
    if isinstance(value, dict):
        return {
            _replace_surrogates(k, loc, places): _replace_surrogates(v, (*loc, k), places)
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [_replace_surrogates(v, (*loc, i), places) for i, v in enumerate(value)]
    return value
