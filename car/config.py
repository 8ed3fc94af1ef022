"""Configuration for `car blame`: `[tool.car]` in pyproject.toml, or car.toml, validated.

Precedence, highest first: command-line options, `CAR_*` environment variables (`CAR_SAMPLES=64`,
`CAR_BASE_URL=...`: the key upper-cased), the configuration file, the built-in defaults. The file is
found by walking up from the working directory; `car.toml` (top-level keys) wins over pyproject.toml
in the same directory, and a pyproject.toml without `[tool.car]` is skipped. Unknown keys and values of
the wrong type are errors (exit 2) that name the file and the key, or the environment variable: a file's
values must have the key's type as written (`samples = "4"` is an error), while `CAR_*` variables,
always text, are parsed as the key's type (`CAR_SAMPLES=4`).

    [tool.car]
    policy = "openai:gpt-4o-mini"
    base_url = "http://localhost:8000/v1"
    api_key_env = "MY_SERVER_KEY"     # the *name* of the variable holding the key, never the key
    samples = 64
    concurrency = 16
"""

from __future__ import annotations

import difflib
import os
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_core import PydanticCustomError

from car.arguments import MOST_PLANNED
from car.backends.options import base_url_problem, thinking_config
from car.errors import InputError
from car.jsonfile import describe_error

__all__ = [
    "BACKEND_KEYS",
    "ENV_PREFIX",
    "Settings",
    "check_backend_options",
    "find_config",
    "load_settings",
    "resolve",
    "resolve_sourced",
    "unknown_variables",
]

ENV_PREFIX = "CAR_"


class Settings(BaseModel):
    """Every key `[tool.car]` may set. None means "not set here"."""

    # inf and nan are numbers to Python, TOML and float(): a temperature of inf would go to the
    # server as `Infinity` (not JSON), a backoff of inf would wait forever.
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    # An empty value is a mistake, named where it was set (as `--policy ''` is refused).
    policy: str | None = Field(default=None, min_length=1)
    env: str | None = Field(default=None, min_length=1)
    scorer: str | None = Field(default=None, min_length=1)
    # At most what a run can plan (`car.arguments.MOST_PLANNED`), named where it was set.
    samples: int | None = Field(default=None, ge=1, le=MOST_PLANNED)
    match_samples: int | None = Field(default=None, ge=0, le=MOST_PLANNED)
    seed: int | None = None
    concurrency: int | None = Field(default=None, ge=1)
    level: float | None = Field(default=None, ge=0.5, lt=1)
    min_effect: float | None = Field(default=None, ge=0, lt=1)
    base_url: str | None = None
    api_key_env: str | None = Field(default=None, min_length=1)
    timeout: float | None = Field(default=None, gt=0)
    max_attempts: int | None = Field(default=None, ge=1)
    max_concurrency: int | None = Field(default=None, ge=1)
    backoff_base: float | None = Field(default=None, ge=0)
    temperature: float | None = Field(default=None, ge=0)
    top_p: float | None = Field(default=None, gt=0, le=1)
    max_tokens: int | None = Field(default=None, gt=0)
    thinking: str | None = None

    @field_validator("thinking", mode="before")
    @classmethod
    def _check_thinking(cls, value: object) -> object:
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)  # `thinking = 8000` in TOML
        if isinstance(value, str):
            try:
                thinking_config(value)
            except ValueError as exc:
                raise PydanticCustomError("thinking", str(exc)) from None
        return value

    @field_validator("base_url")
    @classmethod
    def _check_base_url(cls, value: str | None) -> str | None:
        problem = None if value is None else base_url_problem(value)
        if problem:
            raise PydanticCustomError("base_url", problem)  # the message as is, no "Value error, "
        return value


KEYS = tuple(Settings.model_fields)
# The keys that configure model-server backends (`car.backends.options.BackendOptions`).
BACKEND_KEYS = (
    "base_url",
    "api_key_env",
    "timeout",
    "max_attempts",
    "max_concurrency",
    "backoff_base",
    "temperature",
    "top_p",
    "max_tokens",
    "thinking",
)


def find_config(start: Path | None = None) -> tuple[Path, dict[str, Any]] | None:
    """The nearest car.toml, or pyproject.toml with a `[tool.car]` table, and its car table."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        car_toml = folder / "car.toml"
        if car_toml.is_file():
            return car_toml, _read(car_toml)
        pyproject = folder / "pyproject.toml"
        if pyproject.is_file():
            table = _read(pyproject).get("tool", {})
            if isinstance(table, dict) and isinstance(table.get("car"), dict):
                return pyproject, table["car"]
    return None


def _read(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"{path}: invalid TOML: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read: {exc}") from None


def _validate(
    where: str, values: Mapping[str, Any], names: Mapping[str, str] | None = None, *, strict: bool
) -> Settings:
    """Settings from one source; an error names `where` and the key, or the name the user gave that
    key (`names`: an environment variable). `strict`: values must have their types already (a
    file's `samples = "4"` is an error), else text is parsed (environment variables are text)."""
    _known_names(where, values, KEYS, "key", "known keys")
    try:
        return Settings.model_validate(dict(values), strict=strict)
    except ValidationError as exc:
        err = exc.errors(include_url=False)[0]
        key = ".".join(str(p) for p in err["loc"])
        place = f"{where} {names[key]}" if names and key in names else f"{where}: {key}"
        raise InputError(f"{place}: {describe_error(err)}; got {err.get('input')!r}") from None


def _known_names(where: str, names: Iterable[str], known: Sequence[str], noun: str, listed: str) -> None:
    """An unknown name among `names` is an error naming `where`, with the close match or the list."""
    for name in names:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else f"; {listed}: {', '.join(known)}"
            raise InputError(f"{where}: unknown {noun} {name!r}{hint}")


def check_backend_options(changes: Mapping[str, Any]) -> dict[str, Any]:
    """`car.backends.options.configure`'s options that are not None, checked as a file's keys are:
    a wrong name, type or range fails here, named, rather than in every request of the run."""
    _known_names("configure()", changes, BACKEND_KEYS, "option", "known")
    given = {k: v for k, v in changes.items() if v is not None}
    settings = _validate("configure()", given, strict=True)
    return {key: getattr(settings, key) for key in given}


def load_settings(
    environ: Mapping[str, str] | None = None, start: Path | None = None
) -> tuple[Settings, Settings]:
    """(environment settings, file settings), each validated."""
    env_settings, file_settings, _, _ = _load(environ, start)
    return env_settings, file_settings


def _load(
    environ: Mapping[str, str] | None, start: Path | None
) -> tuple[Settings, Settings, dict[str, str], Path | None]:
    """`load_settings`, with the variable that set each key and the file read (None: none)."""
    env = os.environ if environ is None else environ
    variables = _variables(env)
    from_env = {key: env[name] for key, name in variables.items()}
    env_settings = _validate("environment variable", from_env, variables, strict=False)
    found = find_config(start)
    if found is None:
        return env_settings, Settings(), variables, None
    path, table = found
    return env_settings, _validate(_where(path), table, strict=True), variables, path


def _variables(env: Mapping[str, str]) -> dict[str, str]:
    """key -> the `CAR_*` variable that sets it, as the user spelled it (messages name it)."""
    return {
        k[len(ENV_PREFIX) :].lower(): k
        for k in env
        if k.startswith(ENV_PREFIX) and k[len(ENV_PREFIX) :].lower() in KEYS
    }


def unknown_variables(environ: Mapping[str, str] | None = None) -> list[str]:
    """A line for each `CAR_*` variable that sets nothing (a typo would change nothing without a
    word, where a file's unknown key is an error), with the setting it may have meant."""
    import difflib

    env = os.environ if environ is None else environ
    out = []
    for name in sorted(env):
        key = name[len(ENV_PREFIX) :].lower()
        if not name.startswith(ENV_PREFIX) or key in KEYS:
            continue
        close = difflib.get_close_matches(key, KEYS, n=1)
        hint = f" (did you mean {ENV_PREFIX}{close[0].upper()}?)" if close else ""
        out.append(f"{name} is not a car setting and changes nothing{hint}")
    return out


def _where(path: Path) -> str:
    return f"{path}: [tool.car]" if _in_pyproject(path) else str(path)


def _in_pyproject(path: Path | None) -> bool:
    return path is not None and path.name == "pyproject.toml"


def resolve(
    cli: Mapping[str, Any],
    given: set[str],
    environ: Mapping[str, str] | None = None,
    start: Path | None = None,
) -> dict[str, Any]:
    """Merge: a key the user gave on the command line (`given`) keeps its CLI value; otherwise the
    environment's, else the file's, else the CLI default in `cli`."""
    return resolve_sourced(cli, given, environ, start)[0]


def resolve_sourced(
    cli: Mapping[str, Any],
    given: set[str],
    environ: Mapping[str, str] | None = None,
    start: Path | None = None,
) -> tuple[dict[str, Any], dict[str, str]]:
    """`resolve`, and where each key it took from the environment or the file was set, as a message
    names it ("environment variable CAR_SCORER", "car.toml, key scorer"): a value found wrong only
    later (a spec, when a trace's components are built) is named where the user can fix it."""
    env_settings, file_settings, variables, path = _load(environ, start)
    out = dict(cli)
    origins: dict[str, str] = {}
    for key in KEYS:
        if key in given:
            continue
        for layer in (env_settings, file_settings):
            value = getattr(layer, key)
            if value is not None:
                out[key] = value
                origins[key] = (
                    f"environment variable {variables[key]}"
                    if layer is env_settings
                    else f"{path}{' [tool.car]' if _in_pyproject(path) else ''}, key {key}"
                )
                break
    return out, origins
