"""An application with no tracing code at all, traced by ``opentelemetry-instrument`` (``test_zero_code.py``).

Run as::

    ZERO_CODE_OPENAI_URL=http://127.0.0.1:<port>/v1 ZERO_CODE_ANTHROPIC_URL=http://127.0.0.1:<port> \\
        PYTHONPATH=tests opentelemetry-instrument python tests/zero_code_app.py

It imports neither OpenTelemetry nor ``otel_agentdiag``: whatever is traced, the distro, configurator and
instrumentors found through entry points traced it. Against the fake model server
(``tests/fakes/openai_server.py``) it makes one OpenAI chat completion, one streamed OpenAI chat completion and
one Anthropic ``messages.create``; every value it sends (API key, header, prompts, end-user id, metadata)
carries a sentinel, and so does every answer. It prints one line per call, with no answer text in it.
"""

from __future__ import annotations

import os

from anthropic import Anthropic
from fakes import openai_server as fake
from openai import OpenAI

OPENAI_MODEL = "gpt-4o-mini"
ANTHROPIC_MODEL = "claude-sonnet-4-6"
HEADERS = {"x-request-tag": fake.SENTINEL_HEADER}


def main() -> None:
    openai = OpenAI(
        api_key=fake.SENTINEL_API_KEY,
        base_url=os.environ["ZERO_CODE_OPENAI_URL"],
        default_headers=HEADERS,
        max_retries=0,
    )
    messages = [
        {"role": "system", "content": fake.SENTINEL_SYSTEM},
        {"role": "user", "content": fake.SENTINEL_PROMPT},
    ]
    completion = openai.chat.completions.create(
        model=OPENAI_MODEL,
        messages=messages,  # type: ignore[arg-type]
        safety_identifier=fake.SENTINEL_END_USER,
        metadata={"ticket": fake.SENTINEL_METADATA},
    )
    print("chat", completion.choices[0].finish_reason, completion.choices[0].message.content == fake.ANSWER_TEXT)

    stream = openai.chat.completions.create(
        model=OPENAI_MODEL,
        messages=messages,  # type: ignore[arg-type]
        stream=True,
        stream_options={"include_usage": True},
    )
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    print("stream", text == fake.STREAM_TEXT)

    anthropic = Anthropic(
        api_key=fake.SENTINEL_API_KEY,
        base_url=os.environ["ZERO_CODE_ANTHROPIC_URL"],
        default_headers=HEADERS,
        max_retries=0,
    )
    message = anthropic.messages.create(
        model=ANTHROPIC_MODEL,
        max_tokens=64,
        system=fake.SENTINEL_SYSTEM,
        messages=[{"role": "user", "content": fake.SENTINEL_PROMPT}],
        metadata={"user_id": fake.SENTINEL_END_USER},
    )
    block = message.content[0]
    print("anthropic", message.stop_reason, getattr(block, "text", None) == fake.ANSWER_TEXT)
    print("done")


if __name__ == "__main__":
    main()
