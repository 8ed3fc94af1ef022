"""Reading JSON documents that users hand to car, with one-line errors naming the file and the place.

`read_json` turns unreadable or malformed files into `InputError`s; `describe_validation_error` turns a
pydantic `ValidationError` into "file: $.json.path: what was expected; got what". Validators raise
`PathError` to report a problem at a path of their choosing (for example a dangling reference).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from car.errors import InputError

__all__ = [
    "PathError",
    "describe_validation_error",
    "json_path",
    "kind_of",
    "os_reason",
    "read_bytes",
    "read_json",
    "reject_constant",
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


def json_path(loc: Sequence[str | int]) -> str:
    out = "$"
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


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


def read_json(path: str | Path, *, what: str) -> Any:
    """Parse a JSON file; `what` names the expected content in errors ("a JSON trace")."""
    source = str(path)
    raw = read_bytes(path, what=what)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{source}: byte {exc.start}: not UTF-8 text") from None
    if not text.strip():
        raise InputError(f"{source}: empty file, expected {what}")
    try:
        return json.loads(text, parse_constant=reject_constant)
    except json.JSONDecodeError as exc:
        raise InputError(
            f"{source}: line {exc.lineno} column {exc.colno}: invalid JSON: {exc.msg}"
        ) from None
    except ValueError as exc:
        raise InputError(f"{source}: invalid JSON: {exc}") from None
    except RecursionError:
        raise InputError(f"{source}: invalid JSON: nested too deeply") from None


def reject_constant(name: str) -> float:
    """For `json.loads(parse_constant=...)`: NaN and Infinity are not JSON."""
    raise ValueError(f"{name} is not valid JSON")


_EXPECTED = {
    "model_type": "expected an object",
    "model_attributes_type": "expected an object",
    "dict_type": "expected an object",
    "tuple_type": "expected an array",
    "list_type": "expected an array",
    "string_type": "expected a string",
    "int_type": "expected an integer",
    "int_parsing": "expected an integer",
    "int_from_float": "expected an integer",
    "float_type": "expected a number",
    "float_parsing": "expected a number",
    "bool_type": "expected true or false",
    "bool_parsing": "expected true or false",
}


def describe_validation_error(exc: ValidationError, source: str) -> str:
    """One line for a pydantic error: the most specific problem, its JSON path, what was expected."""
    errors = exc.errors(include_url=False)
    # The deepest location is the most specific complaint (a union reports each member's failure).
    err = max(errors, key=lambda e: len([p for p in e["loc"] if not _is_union_tag(p)]))
    loc = tuple(p for p in err["loc"] if not _is_union_tag(p))
    inner = (err.get("ctx") or {}).get("error")
    if isinstance(inner, PathError):
        return f"{source}: {json_path(inner.loc)}: {inner.msg}"
    kind = err["type"]
    if kind == "missing":
        msg = "required field is missing"
    elif kind == "extra_forbidden":
        msg = "unknown field (check the spelling; `car schema` lists the fields)"
    else:
        msg = _EXPECTED.get(kind) or str(err["msg"]).removeprefix("Value error, ")
        msg = msg.replace("Input should be", "expected")
        got = err.get("input")
        shown = kind_of(got) if isinstance(got, dict | list) else json.dumps(got, ensure_ascii=False)
        msg = f"{msg}; got {shown[:60]}"
    more = len(errors) - 1
    tail = f" (and {more} more problem{'s' if more > 1 else ''})" if more > 0 else ""
    return f"{source}: {json_path(loc)}: {msg}{tail}"


def _is_union_tag(part: str | int) -> bool:
    # pydantic inserts the union member's name ("tuple[...]", "literal['prefix']") into locations.
    return isinstance(part, str) and ("[" in part or part in {"str", "dict[str,any]"})
