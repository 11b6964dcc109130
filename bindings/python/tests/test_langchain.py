"""The LangChain adapters against the real langchain-core: LangChain tools in plans, and
``execute_tool_plan`` as a ``StructuredTool`` called the way an agent calls tools."""

import asyncio
import time

import pytest

pytest.importorskip("langchain_core")

from langchain_core.messages import AIMessage, ToolMessage  # noqa: E402
from langchain_core.tools import tool  # noqa: E402

import toolplan  # noqa: E402
from toolplan.langchain import add_tools, execute_tool_plan_tool  # noqa: E402


STARTED = {}


@tool
def get_weather(city: str) -> dict:
    """Today's temperature in a city."""
    STARTED[city] = time.monotonic()
    time.sleep(0.5)
    return {"city": city, "temp": {"Tokyo": 18, "London": 11}[city]}


@tool
def difference(a: float, b: float) -> float:
    """a minus b."""
    return a - b


STEPS = [
    {"id": "t", "tool": "get_weather", "arguments": {"city": "Tokyo"}},
    {"id": "l", "tool": "get_weather", "arguments": {"city": "London"}},
    {"id": "d", "tool": "difference", "arguments": {"a": "$ref:t.temp", "b": "$ref:l.temp"}},
]


def test_langchain_tools_run_in_plans_in_parallel():
    engine = add_tools(toolplan.Engine(), [get_weather, difference], read_only=True)
    # LangChain's first invocation imports and builds what it needs: not part of the timing.
    difference.invoke({"a": 1, "b": 1})
    started = time.monotonic()
    report = engine.run_sync({"steps": STEPS, "output_steps": ["d"]})
    assert report.outputs == {"d": 7.0}
    took = time.monotonic() - started
    apart = abs(STARTED["Tokyo"] - STARTED["London"])
    assert apart < 0.3, f"the second lookup started {apart:.2f} s after the first (took {took:.2f} s)"


def test_execute_tool_plan_is_a_structured_tool_an_agent_calls():
    plan_tool = execute_tool_plan_tool([get_weather, difference])
    assert plan_tool.name == "execute_tool_plan"
    assert "get_weather" in plan_tool.description
    assert "steps" in plan_tool.tool_call_schema.model_json_schema()["properties"]

    # What an agent does with a model's tool call: invoke the tool with it, get a ToolMessage.
    message = AIMessage(content="", tool_calls=[{
        "name": "execute_tool_plan", "id": "call_1",
        "args": {"steps": STEPS, "output_steps": ["d"]}}])
    result = plan_tool.invoke(message.tool_calls[0])
    assert isinstance(result, ToolMessage) and result.tool_call_id == "call_1"
    assert "7" in result.content
    assert plan_tool.metadata["last_report"].outputs == {"d": 7.0}

    text = asyncio.run(plan_tool.ainvoke({"steps": STEPS[:1]}))
    assert "18" in text


def test_a_bad_plan_from_the_model_is_an_error_it_can_read():
    plan_tool = execute_tool_plan_tool([get_weather])
    with pytest.raises(toolplan.InvalidPlan) as caught:
        plan_tool.invoke({"steps": [{"id": "x", "tool": "nope", "arguments": {}}]})
    assert "nope" in str(caught.value)
