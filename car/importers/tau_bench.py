"""tau-bench and tau2-bench trajectories (fidelity class B: the conversation only).

tau-bench results: a JSON array of `{task_id, reward, info, traj: [OpenAI-style messages], trial?}`.
tau2-bench results: `{info?, tasks?, simulations: [{id, task_id, messages: [{role, content,
tool_calls: [{id, name, arguments, requestor?}]}], reward_info: {reward}, termination_reason}]}`;
a single simulation object is accepted too. One trace per run; a run that cannot be imported (an
empty trajectory) is skipped with a warning and the others import. The simulated user is an LLM, so its
turns are decision steps of the actor "user" (kind user, stochastic). The outcome follows car's
convention: score = 1 - reward (1 is the failure being debugged).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from car.importers import Runs
from car.importers.base import At, Builder, Document
from car.importers.openai_chat import add_chat_messages
from car.trace import Outcome, Trace

__all__ = ["TauBench"]


def _is_tau1(value: Any) -> bool:
    return isinstance(value, dict) and isinstance(value.get("traj"), list) and "reward" in value


def _is_tau2_sim(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("messages"), list)
        and ("reward_info" in value or "termination_reason" in value)
    )


class TauBench:
    name = "tau-bench"
    description = "tau-bench / tau2-bench results (traj or simulations[].messages, with reward)"

    def sniff(self, data: Any, path: str) -> bool:
        if isinstance(data, list) and data:
            return all(_is_tau1(r) for r in data[:20])
        if isinstance(data, dict):
            return _is_tau1(data) or _is_tau2_sim(data) or isinstance(data.get("simulations"), list)
        return False

    def convert(self, doc: Document) -> list[Trace]:
        at, data = doc.at, doc.data
        stem = Path(doc.path).stem
        if isinstance(data, list):
            return Runs.each(enumerate(data), lambda r: self._tau1(doc, r[1], at / r[0], stem))
        obj = at.obj(data, "tau-bench results")
        if _is_tau1(obj):
            return [self._tau1(doc, obj, at, stem)]
        if isinstance(obj.get("simulations"), list):
            sims = obj["simulations"]
            listed = (at / "tasks").arr(obj.get("tasks") or [])
            tasks = {str(t.get("id")): t for t in listed if isinstance(t, dict)}
            return Runs.each(
                enumerate(sims), lambda s: self._tau2(doc, s[1], at / "simulations" / s[0], stem, tasks)
            )
        return [self._tau2(doc, obj, at, stem, {})]

    def _tau1(self, doc: Document, record: Any, at: At, stem: str) -> Trace:
        rec = at.obj(record, "a tau-bench result {task_id, reward, traj}")
        traj = (at / "traj").arr(rec.get("traj"), "the trajectory (a list of chat messages)")
        b = Builder(doc, self.name)
        add_chat_messages(b, traj, at / "traj", user_stochastic=True)
        reward = self._reward(rec.get("reward"), at / "reward")
        task_id = rec.get("task_id")
        trial = rec.get("trial")
        tid = f"tau-bench/{stem}/task-{task_id}" + (f"/trial-{trial}" if trial is not None else "")
        info = rec.get("info")
        meta: dict[str, Any] = {"task_id": task_id, "reward": reward}
        if trial is not None:
            meta["trial"] = trial
        if isinstance(info, dict) and isinstance(info.get("task"), dict):
            meta["task"] = info["task"]
        return b.build(
            trace_id=tid,
            fidelity="B",
            locator=at.where(),
            at=at,
            outcome=self._outcome(reward),
            metadata=meta,
        )

    def _tau2(self, doc: Document, record: Any, at: At, stem: str, tasks: dict[str, Any]) -> Trace:
        sim = at.obj(record, "a tau2 simulation {id, task_id, messages, reward_info}")
        messages = (at / "messages").arr(sim.get("messages"), "the simulation's messages")
        b = Builder(doc, self.name)
        add_chat_messages(b, messages, at / "messages", user_stochastic=True)
        info = sim.get("reward_info")
        reward = None
        if info is not None:
            reward = self._reward(
                (at / "reward_info").obj(info).get("reward"), at / "reward_info" / "reward"
            )
        task_id = sim.get("task_id")
        sid = sim.get("id")
        meta: dict[str, Any] = {"task_id": task_id}
        for key in ("termination_reason", "trial", "seed", "agent_cost", "user_cost"):
            if key in sim:
                meta[key] = sim[key]
        if reward is not None:
            meta["reward"] = reward
        task = tasks.get(str(task_id))
        if task is not None:
            meta["task"] = task
        return b.build(
            trace_id=f"tau2/{stem}/{sid if sid is not None else task_id}",
            fidelity="B",
            locator=at.where(),
            at=at,
            outcome=self._outcome(reward),
            metadata=meta,
        )

    @staticmethod
    def _reward(value: Any, at: At) -> float | None:
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int | float):
            at.fail("a reward between 0 and 1", value)
        if not 0 <= value <= 1:
            at.fail("a reward between 0 and 1", value)
        return float(value)

    @staticmethod
    def _outcome(reward: float | None) -> Outcome:
        if reward is None:
            return Outcome()
        return Outcome(
            failed=reward < 1,
            score=1.0 - reward,
            label="task failed" if reward < 1 else "task solved",
            detail=f"reward {reward:g}",
        )
