"""The LlamaIndex adapters against the real llama-index-core: LlamaIndex tools in plans, and
``toolplan.llamaindex.QueryPlanTool`` beside LlamaIndex's own ``QueryPlanTool`` on the same plans."""

import asyncio
import threading
import time

import pytest

pytest.importorskip("llama_index.core")

from llama_index.core.llms import MockLLM  # noqa: E402
from llama_index.core.response_synthesizers import get_response_synthesizer  # noqa: E402
from llama_index.core.tools import FunctionTool  # noqa: E402
from llama_index.core.tools import QueryPlanTool as LlamaQueryPlanTool  # noqa: E402

import toolplan  # noqa: E402
from toolplan.llamaindex import ExecuteToolPlanTool, QueryPlanTool, add_tools  # noqa: E402

WEATHER = {"Tokyo": 18, "London": 11}


def weather_tool(calls):
    lock = threading.Lock()

    def get_weather(city: str) -> dict:
        """Today's temperature in a city."""
        with lock:
            calls.append(city)
        time.sleep(0.3)
        return {"city": city, "temp": WEATHER[city]}

    return FunctionTool.from_defaults(fn=get_weather)


# Node 1 is read by nodes 3 and 4: LlamaIndex answers it twice, toolplan once.
PLAN = {"nodes": [
    {"id": 1, "query_str": "Tokyo", "tool_name": "get_weather", "dependencies": []},
    {"id": 2, "query_str": "London", "tool_name": "get_weather", "dependencies": []},
    {"id": 3, "query_str": "Which city is warmer?", "dependencies": [1, 2]},
    {"id": 4, "query_str": "Is Tokyo warmer than the warmer city?", "dependencies": [1, 3]},
]}


def synthesizer():
    # MockLLM answers with its prompt: the answer shows exactly what was synthesized.
    return get_response_synthesizer(llm=MockLLM(), response_mode="compact")


def test_the_query_plan_tool_answers_as_llamaindex_does_with_the_shared_child_once():
    ours_calls, theirs_calls = [], []
    ours = QueryPlanTool.from_defaults([weather_tool(ours_calls)], synthesizer())
    theirs = LlamaQueryPlanTool.from_defaults([weather_tool(theirs_calls)], synthesizer())
    assert ours.metadata.description == theirs.metadata.description
    assert ours.metadata.fn_schema is theirs.metadata.fn_schema

    # A first run each, untimed: LlamaIndex builds its synthesizer's prompts on first use.
    ours(**PLAN)
    theirs(**PLAN)
    ours_calls.clear()
    theirs_calls.clear()
    started = time.monotonic()
    ours_out = ours(**PLAN)
    ours_took = time.monotonic() - started
    started = time.monotonic()
    theirs_out = theirs(**PLAN)
    theirs_took = time.monotonic() - started

    assert ours_out.content == theirs_out.content
    assert "'temp': 18" in ours_out.content and "'temp': 11" in ours_out.content
    assert sorted(ours_calls) == ["London", "Tokyo"]
    assert sorted(theirs_calls) == ["London", "Tokyo", "Tokyo"]
    assert ours_took < 0.6 < theirs_took, (ours_took, theirs_took)
    assert ours.last_report is not None and ours.last_report.ok


def test_the_query_plan_tool_async_and_its_problems():
    calls = []
    ours = QueryPlanTool.from_defaults([weather_tool(calls)], synthesizer())
    out = asyncio.run(ours.acall(**PLAN))
    assert "'temp': 11" in out.content
    two_roots = {"nodes": [
        {"id": 1, "query_str": "Tokyo", "tool_name": "get_weather", "dependencies": []},
        {"id": 2, "query_str": "London", "tool_name": "get_weather", "dependencies": []}]}
    with pytest.raises(ValueError):
        ours(**two_roots)
    unknown = {"nodes": [{"id": 1, "query_str": "x", "tool_name": "nope", "dependencies": []}]}
    with pytest.raises(toolplan.InvalidPlan) as caught:
        ours(**unknown)
    assert any("nope" in p for p in caught.value.problems)


def test_llamaindex_tools_run_in_tool_plans():
    calls = []
    engine = add_tools(toolplan.Engine(), [weather_tool(calls)])
    report = engine.run_sync({"steps": [
        {"id": "t", "tool": "get_weather", "arguments": {"city": "Tokyo"}},
        {"id": "l", "tool": "get_weather", "arguments": {"city": "London"}}]})
    assert report.outputs == {"t": {"city": "Tokyo", "temp": 18},
                              "l": {"city": "London", "temp": 11}}

    tool = ExecuteToolPlanTool([weather_tool(calls)])
    assert tool.metadata.name == "execute_tool_plan"
    assert "get_weather" in tool.metadata.description
    out = tool.call(steps=[{"id": "t", "tool": "get_weather", "arguments": {"city": "Tokyo"}}])
    assert "18" in out.content
    schema = tool.metadata.get_parameters_dict()
    assert "steps" in schema["properties"]
