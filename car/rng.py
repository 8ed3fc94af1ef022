"""Event-keyed randomness.

Every random draw in car is keyed by the event it belongs to, (seed, replicate, step, kind), never by
the order in which calls happen. A key maps to its own counter-based generator (Philox), so a run is
bit-reproducible at any concurrency, and two arms that share a replicate share the noise of every
step they both draw at (common random numbers).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np

__all__ = ["EventKey"]

_END = 2**31 - 1  # the step slot used for draws that belong to the end of a rollout (scoring)


@dataclass(frozen=True, slots=True)
class EventKey:
    """Names one random event. `kind` separates draws at the same step (policy, env, score, match)."""

    seed: int
    replicate: int
    step: int
    kind: str

    def _entropy(self) -> list[int]:
        step = _END if self.step < 0 else self.step
        return [
            self.seed & 0xFFFFFFFFFFFFFFFF,
            self.replicate,
            step,
            zlib.crc32(self.kind.encode()),
        ]

    def generator(self) -> np.random.Generator:
        """A fresh generator owned by this event; the same key always gives the same stream."""
        state = np.random.SeedSequence(self._entropy()).generate_state(2, np.uint64)
        return np.random.Generator(np.random.Philox(key=state))

    def seed32(self) -> int:
        """A 31-bit integer seed for backends that take one (LLM servers honouring `seed`)."""
        return int(np.random.SeedSequence(self._entropy()).generate_state(1, np.uint32)[0] >> 1)

    def uniform(self) -> float:
        return float(self.generator().random())

    def at(self, *, step: int | None = None, kind: str | None = None) -> EventKey:
        return EventKey(
            self.seed,
            self.replicate,
            self.step if step is None else step,
            self.kind if kind is None else kind,
        )
