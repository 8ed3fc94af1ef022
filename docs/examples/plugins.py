"""Example plugins: a Python policy and a stateful tool environment for traces/support-refund.json.

    car blame traces/support-refund.json \
        --policy docs/examples/plugins.py@policy \
        --env docs/examples/plugins.py@make_env \
        --scorer tool-called:issue_refund

A policy is any object with a `spec` string and `async def act(decision, key) -> Action`. An
environment has `spec`, `async def restore(history) -> state` and
`async def step(state, index, actor, action, key) -> EnvStep`. A name after `@` may also be a factory:
it is called with the trace and must return such an object.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace

from car import Action, Decision, EnvStep, EventKey, Observation, ToolCall, Trace, Turn

ORDERS = {"A-1042": {"amount": 129.0, "days_since_delivery": 45, "refund_window_days": 30}}


# -- a policy ----------------------------------------------------------------------------------------
@dataclass
class RefundAgent:
    """A stand-in for a model: reads its history, draws from the event key (never from global state)."""

    refund_probability: float = 0.45
    spec: str = "docs/examples/plugins.py@policy"

    async def act(self, decision: Decision, key: EventKey) -> Action:
        history = decision.history
        if not history:
            return _call("call_lookup", "lookup_order", order_id="A-1042")
        if len(history) == 1:
            u = key.uniform()  # one uniform per event: arms on the same replicate share it
            plan = "refund the order" if u < self.refund_probability else "escalate to a human"
            return Action(text=f"PLAN: {plan}")
        if len(history) == 2:
            if "refund" in history[1].action.text:
                return _call("call_act", "issue_refund", order_id="A-1042", amount=129.0)
            return _call("call_act", "escalate", order_id="A-1042", reason="outside refund window")
        return Action(text="Done.")


policy = RefundAgent()


def _call(call_id: str, name: str, **arguments: object) -> Action:
    raw = json.dumps(arguments)
    return Action(tool_calls=(ToolCall(id=call_id, name=name, arguments=arguments, raw_arguments=raw),))


# -- a stateful environment --------------------------------------------------------------------------
@dataclass(frozen=True)
class Shop:
    """The environment's state. Frozen: `step` returns a new Shop and never changes the one it got,
    which is what lets replay keep the state before every turn and fork a rollout from any of them."""

    refunded: frozenset[str] = frozenset()
    tickets: tuple[str, ...] = ()


class ShopEnvironment:
    """Executes the shop's tools against an in-memory shop: no live side effects."""

    def __init__(self, trace: Trace) -> None:
        self.trace = trace
        self.spec = "docs/examples/plugins.py@make_env"

    async def restore(self, history: Sequence[Turn]) -> Shop:
        # Rebuild the state after a prefix by applying its recorded actions to a fresh shop: pure
        # bookkeeping, nothing is executed for real and no observation is recomputed.
        state = Shop()
        for turn in history:
            state, _ = self._apply(state, turn.action)
        return state

    async def step(self, state: Shop, index: int, actor: str, action: Action, key: EventKey) -> EnvStep:
        new, observations = self._apply(state, action)
        steps = self.trace.steps
        next_actor = steps[index + 1].actor if index + 1 < len(steps) else None
        return EnvStep(observations, new, next_actor)

    def _apply(self, state: Shop, action: Action) -> tuple[Shop, tuple[Observation, ...]]:
        out = []
        for call in action.tool_calls:
            order_id = str(call.arguments.get("order_id"))
            order = ORDERS.get(order_id)
            if order is None:
                out.append(Observation(call_id=call.id, content="no such order", is_error=True))
                continue
            if call.name == "lookup_order":
                content = {"order_id": order_id, **order, "qualifies": False}
            elif call.name == "issue_refund":
                state = replace(state, refunded=state.refunded | {order_id})
                content = {"status": "refunded", "order_id": order_id}
            elif call.name == "escalate":
                ticket = f"T-{len(state.tickets) + 1}"
                state = replace(state, tickets=(*state.tickets, ticket))
                content = {"status": "escalated", "ticket": ticket}
            else:
                out.append(
                    Observation(call_id=call.id, content=f"unknown tool {call.name}", is_error=True)
                )
                continue
            out.append(Observation(call_id=call.id, content=json.dumps(content)))
        return state, tuple(out)


def make_env(trace: Trace) -> ShopEnvironment:
    """A factory: `--env docs/examples/plugins.py@make_env` calls it with the trace."""
    return ShopEnvironment(trace)
