"""DSPy's ``ReAct`` traced by OpenInference's DSPy and LiteLLM instrumentors: two ``dspy.Tool`` s (one raising:
ReAct hands the error to the model as the step's observation), ``dspy.LM`` (engine LiteLLM, ``openai/gpt-4o-mini``,
no cache) at the scripted server, ``max_iters=2``; one run in OpenInference's ``using_session`` (DSPy has no session
id of its own)."""

from __future__ import annotations

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch of the price table at import

import contract_app as c
import dspy
from openinference.instrumentation import using_session
from openinference.instrumentation.dspy import DSPyInstrumentor
from openinference.instrumentation.litellm import LiteLLMInstrumentor

a = c.args()
diag = c.configure(a)

instrumentors = (DSPyInstrumentor(), LiteLLMInstrumentor())
for instrumentor in instrumentors:
    instrumentor.instrument(tracer_provider=diag.tracer_provider)
try:
    dspy.configure_cache(enable_disk_cache=False, enable_memory_cache=False)  # every call reaches the server
    lm = dspy.LM(
        "openai/gpt-4o-mini",
        api_base=a.base_url,
        api_key=c.SENTINEL_API_KEY,
        cache=False,
        num_retries=0,
        engine="litellm",  # through litellm.completion, which the LiteLLM instrumentor traces
    )
    dspy.configure(lm=lm, adapter=dspy.ChatAdapter())
    tools = [
        dspy.Tool(c.get_weather, name=a.weather, desc=c.SENTINEL_TOOL_DESCRIPTION),
        dspy.Tool(c.lookup_city, name=a.lookup, desc="Look a city up."),
    ]
    agent = dspy.ReAct("question -> answer", tools=tools, max_iters=2)
    with using_session(c.SENTINEL_CONVERSATION):
        answer = agent(question=c.SENTINEL_PROMPT).answer
    assert "SENTINEL-OUTPUT" in answer, "the run did not end with the scripted answer"
finally:
    for instrumentor in reversed(instrumentors):
        instrumentor.uninstrument()
    diag.shutdown()
