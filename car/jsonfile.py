"""Reading JSON documents that users hand to car, with one-line errors naming the file and the place.

`read_json` turns unreadable or malformed files into `InputError`s; `describe_validation_error` turns a
pydantic `ValidationError` into "file: $.json.path: what was expected; got what". Validators raise
`PathError` to report a problem at a path of their choosing (for example a dangling reference).
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from car.errors import InputError

__all__ = [
    "PathError",
    "describe_error",
    "describe_validation_error",
    "expected_value",
    "json_path",
    "json_text",
    "kind_of",
    "loads",
    "not_utf8",
    "os_reason",
    "read_bytes",
    "read_json",
    "reject_constant",
    "shown_json",
    "utf8_text",
]


def os_reason(exc: OSError) -> str:
    """Why a file could not be written, in a few words. `mkdir(exist_ok=True)` raises
    FileExistsError only when a file sits where a directory should be."""
    if isinstance(exc, FileExistsError):
        return f"{exc.filename} is not a directory"
    return exc.strerror or str(exc)


class PathError(ValueError):
    """A validation problem at a JSON path inside a document (raised from validators)."""

    def __init__(self, loc: tuple[str | int, ...], msg: str) -> None:
        super().__init__(msg)
        self.loc = loc
        self.msg = msg


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def json_path(loc: Sequence[str | int]) -> str:
    out = "$"
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{_escaped(part)}"
    return out


def shown_json(value: Any) -> str:
    """`value` as JSON for a message: readable (not ASCII-escaped), except a lone UTF-16 surrogate,
    which stays an escape: UTF-8 cannot encode it, and a message holding one could not be printed
    (`car validate DIR`'s table, a batch's JSONL record)."""
    return _escaped(json.dumps(value, ensure_ascii=False))


def _escaped(text: str) -> str:
    return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


# JSON escapes C0 controls but may hold C1 and bidirectional ones raw, which a terminal or a CI log
# acts on as it would elsewhere. Outside strings a JSON text is ASCII with no `#`, so these occur in
# strings only, where the `\\uXXXX` escape of a character parses back to the same text.
_JSON_RAW = re.compile(r"[\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]|(?<=##)\[")


def json_text(value: Any, *, indent: int | None = None) -> str:
    """`value` as one JSON document and its newline, for a file or a terminal: non-ASCII kept as
    is, but C1 and bidirectional controls, and the `[` of `##[`, written as `\\uXXXX` escapes: the
    same JSON value, safe to print (as `car.render.visible` makes other text)."""
    text = json.dumps(value, indent=indent, ensure_ascii=False)
    return _JSON_RAW.sub(lambda m: f"\\u{ord(m.group()):04x}", text) + "\n"


def utf8_text(text: str) -> str:
    """`text` (a path, or a message naming one) as text UTF-8 can encode: a byte of a file name that
    is not UTF-8, which Python keeps as a surrogate (U+DC80-U+DCFF), is shown as `\\xff`; any other
    lone surrogate as its `\\uXXXX` escape. Reports, records and the store hold only such text."""
    if not _LONE_SURROGATE.search(text):
        return text
    return _LONE_SURROGATE.sub(
        lambda m: (
            f"\\x{ord(m.group()) - 0xDC00:02x}"
            if 0xDC80 <= ord(m.group()) <= 0xDCFF
            else f"\\u{ord(m.group()):04x}"
        ),
        text,
    )


def kind_of(value: Any) -> str:
    """A JSON value's kind, as an error message names it."""
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}.get(
        type(value), "a number" if isinstance(value, int | float) else "null"
    )


def read_bytes(path: str | Path, *, what: str = "a trace") -> bytes:
    """A file's bytes; a missing or unreadable file is an `InputError` naming it."""
    source = str(path)
    try:
        return Path(path).read_bytes()
    except FileNotFoundError:
        raise InputError(f"{source}: no such file") from None
    except IsADirectoryError:
        raise InputError(f"{source}: is a directory, expected {what} file") from None
    except OSError as exc:
        raise InputError(f"{source}: cannot read: {exc.strerror}") from None


# Compressed files people keep logs in (the OpenTelemetry Collector's file exporter writes zstd).
_COMPRESSED = (
    (b"\x1f\x8b", "gzip", "gunzip FILE"),
    (b"\x28\xb5\x2f\xfd", "zstd", "zstd -d FILE"),
)


def not_utf8(raw: bytes, start: int) -> str:
    """Where the bytes `raw` stop being UTF-8 (`start`, the first bad byte), for "FILE: ..." errors:
    the line, so a large file's bad byte can be found; a compressed file, and JSON in UTF-16 (as
    Windows PowerShell writes with `>`), are named as such."""
    for magic, kind, tool in _COMPRESSED:
        if raw.startswith(magic):
            return f"a {kind}-compressed file, not UTF-8 text: decompress it first ({tool})"
    if raw[:2] in (b"\xff\xfe", b"\xfe\xff"):
        try:
            utf16 = raw.decode("utf-16").lstrip()[:1] in ("{", "[")
        except UnicodeDecodeError:
            utf16 = False  # binary bytes that only start like it
        if utf16:
            return "UTF-16 text (it starts with a UTF-16 byte order mark), not UTF-8: save it as UTF-8"
    line = raw.count(b"\n", 0, start) + 1
    return f"line {line} (byte {start}): not UTF-8 text"


def read_json(path: str | Path, *, what: str) -> Any:
    """Parse a JSON file; `what` names the expected content in errors ("a JSON trace")."""
    source = str(path)
    raw = read_bytes(path, what=what)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{source}: {not_utf8(raw, exc.start)}") from None
    if not text.strip():
        raise InputError(f"{source}: empty file, expected {what}")
    try:
        return loads(text, parse_float=finite_float)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{source}: line {exc.lineno} column {exc.colno}: invalid JSON: {exc.msg}"
        ) from None
    except ValueError as exc:
        raise InputError(f"{source}: invalid JSON: {exc}") from None
    except RecursionError:
        raise InputError(f"{source}: invalid JSON: nested too deeply") from None


def loads(text: str, parse_float: Callable[[str], Any] | None = None) -> Any:
    """`json.loads` by car's rules: NaN and Infinity are refused, and an integer longer than Python
    converts (`sys.get_int_max_str_digits`) is a `JSONDecodeError` at its line and column, as any
    other malformed JSON is (Python's own error names no place). `parse_float` as in `json.loads`."""
    try:
        return json.loads(text, parse_constant=reject_constant, parse_float=parse_float)
    except json.JSONDecodeError:
        raise
    except _Infinite as number:
        raise _error_at(
            text,
            number.text,
            f"{number.text} is beyond the range of a double (JSON has no infinity, so car would "
            "write it as null); write a smaller number, or the value as a string",
        ) from None
    except ValueError:
        try:  # again, to find the integer: only a failed parse pays for it
            json.loads(
                text, parse_constant=reject_constant, parse_float=parse_float, parse_int=_whole_number
            )
        except _LongInteger as long:
            digits = long.digits
            n = len(digits.lstrip("-"))
            limit = sys.get_int_max_str_digits()
            raise _error_at(
                text, digits, f"an integer of {n} digits, more than the {limit} car reads"
            ) from None
        raise


def finite_float(text: str) -> float:
    """For `loads(parse_float=...)`: a number as a double; one beyond a double's range (`1e400`) is
    refused at its place, as a file car wrote cannot hold it (JSON has no infinity)."""
    value = float(text)
    if math.isfinite(value):
        return value
    raise _Infinite(text)


class _Infinite(ValueError):
    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text


class _LongInteger(ValueError):
    def __init__(self, digits: str) -> None:
        super().__init__(digits)
        self.digits = digits


def _whole_number(digits: str) -> int:
    try:
        return int(digits)
    except ValueError:
        raise _LongInteger(digits) from None


def _error_at(text: str, literal: str, message: str) -> json.JSONDecodeError:
    """A JSON error at the first place `literal`, a number, stands as a number in `text` (not inside
    a longer one; a string holding the same characters before it is not worth a tokenizer)."""
    found = re.search(rf"(?<![0-9.\-]){re.escape(literal)}(?![0-9.eE])", text)
    return json.JSONDecodeError(message, text, found.start() if found else 0)


def reject_constant(name: str) -> float:
    """For `json.loads(parse_constant=...)`: NaN and Infinity are not JSON."""
    raise ValueError(f"{name} is not valid JSON")


# What a pydantic error type means, in the words a user of a JSON or TOML file knows.
_EXPECTED = {
    "model_type": "an object",
    "model_attributes_type": "an object",
    "dict_type": "an object",
    "tuple_type": "an array",
    "list_type": "an array",
    "string_type": "a string",
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "finite_number": "a finite number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "none_required": "null",
}
_BOUNDS = {
    "greater_than": ("gt", "more than"),
    "greater_than_equal": ("ge", "at least"),
    "less_than": ("lt", "less than"),
    "less_than_equal": ("le", "at most"),
}
_COUNTS = {"too_short": ("min_length", "at least"), "too_long": ("max_length", "at most")}
_LENGTHS = {"string_too_short": ("min_length", "at least"), "string_too_long": ("max_length", "at most")}


def expected_value(err: ErrorDetails) -> str | None:
    """What a pydantic error says a value should have been, in plain words ("an integer", "at least
    1", "at least one step", "'user' or 'tool'"), for "expected ..." and "must be ..." messages; None
    for the errors that are not about a value's type or range (a validator's own message)."""
    kind = err["type"]
    ctx = err.get("ctx") or {}
    if kind in _EXPECTED:
        return _EXPECTED[kind]
    if kind in _BOUNDS:
        key, words = _BOUNDS[kind]
        bound = ctx[key]  # 0 for a float field is 0.0 here
        return f"{words} {int(bound) if isinstance(bound, float) and bound.is_integer() else bound}"
    if kind in _COUNTS:
        key, words = _COUNTS[kind]
        return f"{words} {_count(ctx[key], _item_noun(err['loc']))}"
    if kind in _LENGTHS:
        key, words = _LENGTHS[kind]
        if kind == "string_too_short" and ctx[key] == 1:
            return "a non-empty string"
        return f"a string of {words} {_count(ctx[key], 'character')}"
    if kind in ("literal_error", "enum"):
        return str(ctx["expected"])
    return None


def describe_error(err: ErrorDetails) -> str:
    """The problem a pydantic error reports, in plain words, without the value received."""
    kind = err["type"]
    if kind == "missing":
        return "required field is missing"
    if kind == "extra_forbidden":
        return "unknown field (check the spelling; `car schema` lists the fields)"
    value = expected_value(err)
    if value is not None:
        return f"expected {value}"
    return str(err["msg"]).removeprefix("Value error, ").replace("Input should be", "expected")


def describe_validation_error(exc: ValidationError, source: str) -> str:
    """One line for a pydantic error: the most specific problem, its JSON path, what was expected."""
    errors = exc.errors(include_url=False)
    # The deepest location is the most specific complaint (a union reports each member's failure).
    err = max(errors, key=lambda e: len(_path(e)))
    loc = _path(err)
    inner = (err.get("ctx") or {}).get("error")
    if isinstance(inner, PathError):
        return f"{source}: {json_path(inner.loc)}: {inner.msg}"
    msg = describe_error(err)
    if err["type"] not in ("missing", "extra_forbidden"):
        got = err.get("input")
        if got == []:
            shown = "an empty array"
        elif isinstance(got, dict | list):
            shown = kind_of(got)
        else:
            shown = shown_json(got)[:60]
        msg = f"{msg}; got {shown}"
    # A failure at a location above this one is another member of the same union failing, not a
    # problem of its own.
    more = sum(1 for e in errors if e is not err and _path(e) != loc[: len(_path(e))])
    tail = f" (and {more} more problem{'s' if more > 1 else ''})" if more > 0 else ""
    return f"{source}: {json_path(loc)}: {msg}{tail}"


def _path(err: ErrorDetails) -> tuple[str | int, ...]:
    return tuple(p for p in err["loc"] if not _is_union_tag(p))


def _count(n: int, noun: str) -> str:
    return f"one {noun}" if n == 1 else f"{n} {noun}s"


def _item_noun(loc: Sequence[str | int]) -> str:
    """What an array at `loc` holds, from its name: `steps` holds steps, `tool_calls` tool calls."""
    name = next((p for p in reversed(loc) if isinstance(p, str) and not _is_union_tag(p)), "")
    return name[:-1].replace("_", " ") if name.endswith("s") and len(name) > 1 else "item"


def _is_union_tag(part: str | int) -> bool:
    # pydantic inserts the union member's name ("tuple[...]", "literal['prefix']") into locations.
    return isinstance(part, str) and ("[" in part or part in {"str", "dict[str,any]"})
