"""Event-keyed randomness.

Every random draw in car is keyed by the event it belongs to, (seed, replicate, step, kind), never by
the order in which calls happen. A key hashes (BLAKE2b) to its own draws: a single uniform straight
from the digest, or a counter-based generator (Philox) keyed by it for longer streams. A run is so
bit-reproducible at any concurrency, and two arms that share a replicate share the noise of every
step they both draw at (common random numbers).
"""

from __future__ import annotations

import hashlib
import struct
from dataclasses import dataclass

import numpy as np

__all__ = ["DERIVATION", "EventKey"]

_END = 2**31 - 1  # the step slot used for draws that belong to the end of a rollout (scoring)
_MASK = 2**64 - 1
_WORDS = struct.Struct("<3Q")  # seed, replicate, step; the kind follows as UTF-8
# Names how keys become draws: a new derivation gets a new name (never the same digests), and the
# rollout store keys its entries by it, so it never hands back a rollout drawn the old way.
DERIVATION = "car.rng/2"
_PERSON = DERIVATION.encode()


@dataclass(frozen=True, slots=True)
class EventKey:
    """Names one random event. `kind` separates draws at the same step (policy, env, score, match)."""

    seed: int
    replicate: int
    step: int
    kind: str

    def digest(self) -> bytes:
        """16 bytes owned by this event: a hash of the seed, replicate, step and kind."""
        step = _END if self.step < 0 else self.step
        words = _WORDS.pack(self.seed & _MASK, self.replicate & _MASK, step & _MASK)
        return hashlib.blake2b(words + self.kind.encode(), digest_size=16, person=_PERSON).digest()

    def generator(self) -> np.random.Generator:
        """A fresh generator owned by this event; the same key always gives the same stream."""
        return np.random.Generator(np.random.Philox(key=np.frombuffer(self.digest(), np.uint64)))

    def seed32(self) -> int:
        """A 31-bit integer seed for backends that take one (LLM servers honouring `seed`)."""
        return int.from_bytes(self.digest()[8:12], "little") >> 1

    def uniform(self) -> float:
        """One uniform draw in [0, 1) with 53 random bits, without building a generator."""
        return (int.from_bytes(self.digest()[:8], "little") >> 11) * 2.0**-53

    def at(self, *, step: int | None = None, kind: str | None = None) -> EventKey:
        return EventKey(
            self.seed,
            self.replicate,
            self.step if step is None else step,
            self.kind if kind is None else kind,
        )
