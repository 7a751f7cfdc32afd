"""A LlamaIndex agent app with no tracing code, traced by ``opentelemetry-instrument`` (``test_zero_code.py``).

Run as::

    PYTHONPATH=tests opentelemetry-instrument python tests/zero_code_llama_index_app.py

One run of the scripted ``FunctionAgent`` of ``llama_index_agent.py`` (LlamaIndex's own test model: no server).
It prints one line.
"""

from __future__ import annotations

import asyncio
import warnings

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from llama_index_agent import ANSWER, make_agent, run_agent


def main() -> None:
    with warnings.catch_warnings():  # llama-index-workflows reads pydantic 2's deprecated fields
        warnings.simplefilter("ignore", DeprecationWarning)
        answer = asyncio.run(run_agent(make_agent()))
    print("agent", answer == ANSWER)


if __name__ == "__main__":
    main()
