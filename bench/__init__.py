"""car's validation and benchmark suite: planted-truth models, car's estimators, the paper's baselines.

Run `python -m bench --quick` (CI, under half a minute) or `python -m bench` (the full suite); see
docs/validation.md for what each model tests and how to read bench/RESULTS.md.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

T = TypeVar("T")


def run_sync(main: Callable[[], Awaitable[T]]) -> T:
    """`asyncio.run(main())` without a cost of Python 3.11's: on its way out `asyncio.run` asks
    `signal.getsignal` for its SIGINT handler, which formats the handler's repr, and with it the
    finished main task's, result included; for a cell's arrays of outcomes or list of rollouts that
    formatting cost about a tenth of the suite's time. The main task here returns nothing."""
    box: list[T] = []

    async def wrapped() -> None:
        box.append(await main())

    asyncio.run(wrapped())
    return box[0]
