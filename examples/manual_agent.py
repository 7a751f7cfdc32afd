"""A minimal agent traced by hand with otel-agentdiag: run it, then `agentdiag traces`.

python examples/manual_agent.py [--store PATH]
"""

from __future__ import annotations

import argparse
import asyncio
import random

import otel_agentdiag as agentdiag


@agentdiag.tool("lookup_word")
async def lookup_word(word: str) -> str:
    await asyncio.sleep(0)  # stands in for real I/O
    return {"gato": "cat", "perro": "dog"}.get(word, "?")


async def fake_model(prompt: str, turn: int) -> dict:
    """Stands in for an LLM client: asks for one tool call, then answers."""
    if turn == 0:
        return {"tool": "lookup_word", "args": {"word": "gato"}, "usage": (42, 7), "finish": "tool_calls"}
    return {"answer": "gato means cat", "usage": (58, 9), "finish": "stop"}


async def main(store: str | None) -> str:
    diag = agentdiag.configure(service_name="vocab-agent", store=store)
    answer = ""
    with agentdiag.agent_run("vocab-agent", conversation_id=f"session-{random.randrange(10**6)}", user_id="alice"):
        for turn in range(3):
            with agentdiag.iteration(turn):
                with agentdiag.llm_call(provider="openai", model="gpt-4o-mini") as call:
                    reply = await fake_model("What does 'gato' mean?", turn)
                    call.record_response(
                        finish_reasons=[reply["finish"]],
                        input_tokens=reply["usage"][0],
                        output_tokens=reply["usage"][1],
                    )
                if "answer" in reply:
                    answer = reply["answer"]
                    break
                await lookup_word(**reply["args"])
    diag.shutdown()
    print(f"{answer} (traces in {diag.store_path})")
    return answer


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("--store", default=None)
    asyncio.run(main(parser.parse_args().store))
