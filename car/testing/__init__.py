"""Test doubles that ship with car: use them to test plugins, configurations and CI setups offline.

car.testing.loopback   `LoopbackServer`: a real HTTP server on 127.0.0.1 speaking the OpenAI Chat
                       Completions and Anthropic Messages formats, whose "model" is a scripted
                       stochastic program (a simulated scenario's decision program by default),
                       with fault injection (429 + Retry-After, 500, slow answers, dropped
                       connections, malformed JSON, an exhausted quota, refusals, content
                       filtering, answers cut at max tokens, answers of the wrong shape, `n` or
                       `seed` rejected, `n` answered with a 500 as llama.cpp does), and
                       Anthropic's thinking rules (signed blocks, `loopback_thinking`)
"""

from __future__ import annotations

from car.testing.loopback import Faults, LoopbackServer, ScenarioModel, TextModel, loopback_thinking

__all__ = ["Faults", "LoopbackServer", "ScenarioModel", "TextModel", "loopback_thinking"]
