"""Model-server backends: policies, a simulated-tool environment and an LLM judge over HTTP.

    car.backends.http       the shared HTTP layer: retries with backoff, an adaptive concurrency
                            limit per backend, secret redaction, one-line `BackendError`s
    car.backends.options    `BackendOptions` (base URL, key variable, timeouts, overrides) and
                            `configure`, the context the spec factories read them from
    car.backends.wire       chat messages and tool schemas to and from the OpenAI and Anthropic formats
    car.backends.openai     `openai:MODEL`: Chat Completions (OpenAI, vLLM, llama.cpp, Ollama, LiteLLM)
    car.backends.anthropic  `anthropic:MODEL`: the Messages API
    car.backends.llm_sim    `llm-sim:BACKEND:MODEL`: recorded observations, a model for unseen calls
    car.backends.judge      `llm-judge:[BACKEND:]MODEL`: rubric or extract-then-compare scorer

Nothing here is imported by `import car`; the spec factories import these modules on first use.
"""

from __future__ import annotations

__all__: list[str] = []
