"""mini-swe-agent trajectories (fidelity class B: the conversation only).

A `*.traj.json` file: `{info: {exit_status, submission, model_stats, config, mini_version?},
messages: [...], trajectory_format: "mini-swe-agent-1" | "mini-swe-agent-1.1"}`. The messages are a
chat list, but only the assistant's turns are decisions: the first user message is the task, and a
user message after an assistant turn is the environment's reply (the command's output with its
`<returncode>` and `<output>`, a format error, a timeout), not a human turn.

Text-based runs (v1, and v2's `*_textbased` models) hold one bash command in a fenced code block of
the assistant's text (` ```bash ` in v1, ` ```mswea_bash_command ` in v2, or the `action_regex` the
config records). The step's action is that text, exactly, with a call of the tool `bash` whose
`command` is the block's content (stripped, as mini-swe-agent runs it); v2 records the parsed
commands as `extra.actions`, which are used when present. Tool-calling runs (v2's default) hold
OpenAI-style `tool_calls` and `role: "tool"` results, read as in `openai-chat`. v2 does not keep a
reply it rejected as an assistant message: the format error's `extra.model_response` holds it, and
it becomes the step. In v2 a user's interruption, rejection, new task or command (human mode) is a
human turn (`extra.interrupt_type`, `extra.actions`); v1 does not tell them from the environment's
replies. The final `role: "exit"` message (v2) is the run's exit record, not a turn.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from car.importers.base import At, Builder, Document, api_model, sampling_from, text_of
from car.importers.openai_chat import chat_attachments, chat_tool_call
from car.importers.thinking import (
    chat_reasoning,
    chat_reasoning_sealed,
    chat_reasoning_texts,
    not_replayed,
    thinking_metadata,
)
from car.trace import Sampling, ToolCall, Trace

__all__ = ["BASH_TOOL", "MiniSweAgent"]

AGENT = "assistant"
USER = "user"

# v1 parsed ```bash blocks; v2's text-based models ```mswea_bash_command blocks (so the bash
# examples in its prompts are not actions). A recorded action_regex overrides both.
_DEFAULT_ACTION = re.compile(r"```(?:bash|mswea_bash_command)\s*\n(.*?)\n```", re.DOTALL)
_RETURNCODE = re.compile(r"<returncode>\s*(-?\d+)\s*</returncode>")
# The interruptions v2's interactive agent records for what the person at the terminal did.
_HUMAN_INTERRUPTS = ("UserInterruption", "UserRejection", "UserNewTask")

# LiteLLM's providers (mini-swe-agent names models as LiteLLM does: `anthropic/claude-...`); the API
# knows the model by the rest of the name.
_LITELLM_PROVIDERS = frozenset(
    {
        *("openai", "anthropic", "azure", "azure_ai", "gemini", "vertex_ai", "bedrock", "sagemaker"),
        *("ollama", "ollama_chat", "together_ai", "openrouter", "groq", "mistral", "deepseek", "xai"),
        *("fireworks_ai", "hosted_vllm", "vllm", "huggingface", "cohere", "perplexity", "cerebras"),
        *("sambanova", "nvidia_nim", "watsonx", "databricks", "deepinfra", "lm_studio", "replicate"),
    }
)

# The one tool a tool-calling mini-swe-agent (v2) offers its model. The trajectory does not record
# it; a replay of such a run needs it to let the model call bash.
BASH_TOOL: dict[str, Any] = {
    "name": "bash",
    "description": "Execute a bash command",
    "parameters": {
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The bash command to execute"},
        },
        "required": ["command"],
    },
}


def _is_trajectory(value: Any) -> bool:
    if not isinstance(value, dict) or not isinstance(value.get("messages"), list):
        return False
    fmt = value.get("trajectory_format")
    if isinstance(fmt, str):
        return fmt.startswith("mini-swe-agent")
    # Files written before the format was named: the info block is the tell.
    info = value.get("info")
    return isinstance(info, dict) and ("exit_status" in info or "mini_version" in info)


class MiniSweAgent:
    name = "mini-swe-agent"
    description = "mini-swe-agent trajectories (*.traj.json: {info, messages, trajectory_format})"

    def sniff(self, data: Any, path: str) -> bool:
        return _is_trajectory(data)

    def convert(self, doc: Document) -> list[Trace]:
        at = doc.at
        data = at.obj(doc.data, "a mini-swe-agent trajectory {info, messages, trajectory_format}")
        info = (at / "info").obj(data.get("info") or {}, "the run's info (an object)")
        messages = (at / "messages").arr(data.get("messages"), "the trajectory's messages (a list)")
        config = _object(info.get("config"))
        model = _object(config.get("model"))
        regex = _action_regex(model, _object(config.get("agent")))
        b = Builder(doc, self.name)
        sampling = self._sampling(b, model)
        run = _Run(b, regex, sampling)
        for i, raw in enumerate(messages):
            run.message(raw, at / "messages" / i)
        run.finish()
        meta: dict[str, Any] = {}
        for key in ("exit_status", "submission", "mini_version", "model_stats"):
            if info.get(key) is not None:
                meta[key] = info[key]
        if run.exit_status is not None and "exit_status" not in meta:
            meta["exit_status"] = run.exit_status
        if isinstance(data.get("trajectory_format"), str):
            meta["trajectory_format"] = data["trajectory_format"]
        stem = Path(doc.path).name.removesuffix(".json").removesuffix(".traj") or "run"
        return [
            b.build(
                trace_id=f"mini-swe-agent/{stem}",
                fidelity="B",
                locator="$",
                at=at,
                task=run.task,
                metadata=meta,
            )
        ]

    @staticmethod
    def _sampling(b: Builder, model: dict[str, Any]) -> Sampling | None:
        """The model and the sampling parameters the config sent with every call."""
        values = dict(_object(model.get("model_kwargs")))
        if isinstance(model.get("model_name"), str):
            values["model"] = api_model(model["model_name"], _LITELLM_PROVIDERS)
        sampling, dropped = sampling_from(values)
        if dropped:
            b.warn("sampling-invalid", f"ignored unusable sampling values: {', '.join(dropped)}")
        return sampling


class _Run:
    """The messages of one trajectory, turned into steps in order."""

    def __init__(self, b: Builder, regex: re.Pattern[str], sampling: Sampling | None) -> None:
        self.b = b
        self.regex = regex
        self.sampling = sampling
        self.task = ""
        self.has_task = False
        self.pending: str | None = None  # the text-parsed call the next environment reply answers
        self.parsed: At | None = None  # where the first call parsed from text is
        self.tool_calling = False
        self.seen: list[tuple[At, bool]] = []  # reasoning fields, and whether each is encrypted
        self.exit_status: Any = None
        b.actor(AGENT, "agent")

    def message(self, raw: Any, here: At) -> None:
        msg = here.obj(raw, "a chat message {role, content}")
        role = msg.get("role")
        if not isinstance(role, str):
            detail = None
            if "type" in msg:
                detail = (
                    "a Responses API item; trajectories of mini-swe-agent's response models are "
                    "not supported"
                )
            (here / "role").fail("a role (system, user, assistant, tool or exit)", role, detail=detail)
        extra = _object(msg.get("extra"))
        content = text_of(msg.get("content"), here / "content")
        if isinstance(msg.get("content"), list):  # v2 with a multimodal_regex expands every message
            chat_attachments(self.b, msg["content"], here / "content")
        if role == "system":
            if self.b.n_steps == 0 and not self.has_task:
                self.b.add_system_prompt(AGENT, content)
            else:  # an instruction injected mid-run is an input, like a user turn
                self._user_step(content, metadata={"role": "system"})
        elif role == "assistant":
            self._assistant(msg, content, extra, here)
        elif role == "user":
            self._user(content, extra, here)
        elif role == "tool":
            call_id = (here / "tool_call_id").call_id(
                msg.get("tool_call_id"), "the id of the tool call this message answers"
            )
            error = _failed(extra, content, parse=False)
            if not self.b.observe(call_id, content, is_error=error):
                self.b.observe_orphan(call_id, content, is_error=error)
        elif role == "exit":
            # v2's exit record (exit_status and submission, as info holds them); the model never
            # saw it.
            self.exit_status = extra.get("exit_status", self.exit_status)
        else:
            (here / "role").fail("a role (system, user, assistant, tool or exit)", role)

    def _assistant(self, msg: dict[str, Any], content: str, extra: dict[str, Any], here: At) -> None:
        calls_raw = msg.get("tool_calls")
        calls: list[ToolCall] = []
        meta: dict[str, Any] = {}
        self.pending = None
        if calls_raw:
            self.tool_calling = True
            calls = [
                chat_tool_call(c, here / "tool_calls" / j, self.b)
                for j, c in enumerate((here / "tool_calls").arr(calls_raw, "a list of tool calls"))
            ]
        else:
            commands = _recorded_commands(extra)
            if commands is None:
                commands = [c.strip() for c in self.regex.findall(content)]
            # mini-swe-agent runs a reply only when it holds exactly one command.
            if len(commands) == 1:
                calls = [self._bash(commands[0], here)]
            else:
                meta["actions_found"] = len(commands)
        fields = chat_reasoning(msg, here)
        self.seen += [(place, chat_reasoning_sealed(block)) for place, block in fields]
        blocks = [block for _, block in fields]
        meta.update(thinking_metadata(chat_reasoning_texts(blocks)))
        self.b.step(AGENT, content, calls, sampling=self.sampling, metadata=meta, reasoning=blocks)

    def _user(self, content: str, extra: dict[str, Any], here: At) -> None:
        if not self.has_task and self.b.n_steps == 0:
            self.task, self.has_task = content, True
            return
        interrupt = extra.get("interrupt_type")
        if interrupt == "FormatError":
            self._rejected(content, extra, here)
            return
        commands = _recorded_commands(extra)
        if interrupt in _HUMAN_INTERRUPTS or commands is not None:
            # The person at the terminal: a comment, or a command they ran (v2 human mode).
            calls = [self._bash(c, here) for c in commands or []]
            self._user_step(content, calls)
            self.pending = calls[0].id if len(calls) == 1 else None
            return
        if self.b.n_steps == 0:  # more instructions before the agent's first turn
            self._user_step(content)
            return
        if self.pending is not None:
            self.b.observe(self.pending, content, is_error=_failed(extra, content, parse=True))
            self.pending = None
        else:
            self.b.observe(None, content, is_error=_failed(extra, content, parse=False))

    def _rejected(self, content: str, extra: dict[str, Any], here: At) -> None:
        """A reply v2 rejected (FormatError) is no assistant message: the text-based models keep it
        in the error's `extra.model_response`, the tool-calling ones nowhere. Either way the model
        spoke, so the reply is a step (empty when it is lost) and the error its observation."""
        reply = extra.get("model_response")
        meta: dict[str, Any] = {"format_error": True}
        if isinstance(reply, str):
            found = extra.get("n_actions")
            if not isinstance(found, int) or isinstance(found, bool):
                found = len(self.regex.findall(reply))
            meta["actions_found"] = found
        else:
            reply = ""
            self.b.warn(
                "model-output-missing",
                "a reply mini-swe-agent rejected (FormatError) is not in the trajectory; its step "
                f"has empty text, and the error message is its observation (first at {here.where()})",
            )
        self.pending = None
        self.b.step(AGENT, reply, sampling=self.sampling, metadata=meta)
        self.b.observe(None, content)

    def _user_step(self, content: str, calls: list[ToolCall] | None = None, **kw: Any) -> None:
        self.b.actor(USER, "user")
        self.b.step(USER, content, calls or (), **kw)

    def _bash(self, command: str, here: At) -> ToolCall:
        if self.parsed is None:
            self.parsed = here
        call = ToolCall(id=f"bash-{here.loc[-1]}", name="bash", arguments={"command": command})
        self.pending = call.id
        return call

    def finish(self) -> None:
        if self.tool_calling:
            self.b.actor(AGENT, "agent", tools=[BASH_TOOL])
        if self.parsed is not None:
            self.b.warn(
                "calls-from-text",
                "the bash commands were parsed from the text of each turn (the model made no tool "
                "calls); the text is kept exactly, but a replay sends the command as a call of the "
                "tool 'bash' and its output as that call's result, where the model saw a user "
                f"message (first at {self.parsed.where()})",
            )
        if self.seen:
            self.b.warn(
                "thinking-not-replayed",
                not_replayed(self.seen, "reasoning field", "with encrypted or redacted entries"),
            )


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _action_regex(model: dict[str, Any], agent: dict[str, Any]) -> re.Pattern[str]:
    """The regex the run parsed actions with: v2 records it in the model config, v1 in the agent's;
    the defaults of both versions otherwise (or when the recorded one does not compile)."""
    for cfg in (model, agent):
        pattern = cfg.get("action_regex")
        if isinstance(pattern, str) and pattern:
            try:
                compiled = re.compile(pattern, re.DOTALL)
            except re.error:
                continue
            if compiled.groups == 1:
                return compiled
    return _DEFAULT_ACTION


def _recorded_commands(extra: dict[str, Any]) -> list[str] | None:
    """The commands v2 recorded as parsed from a message (`extra.actions`), if it did."""
    actions = extra.get("actions")
    if not isinstance(actions, list):
        return None
    commands = [a.get("command") for a in actions if isinstance(a, dict)]
    if len(commands) != len(actions) or not all(isinstance(c, str) for c in commands):
        return None
    return [str(c) for c in commands]


def _failed(extra: dict[str, Any], content: str, *, parse: bool) -> bool:
    """Whether a command's output says it failed: a nonzero return code (v2 records it in
    `extra.returncode`; v1 only in the text, `<returncode>N</returncode>`) or an exception."""
    if extra.get("exception_info"):
        return True
    code = extra.get("returncode")
    if isinstance(code, int) and not isinstance(code, bool):
        return code != 0
    if parse:
        found = _RETURNCODE.search(content)
        return found is not None and int(found.group(1)) != 0
    return False
