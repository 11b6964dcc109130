"""LangChain adapters: LangChain tools in toolplan plans, and ``execute_tool_plan`` as a
LangChain tool.

* ``add_tools(engine, tools)`` registers any LangChain ``BaseTool`` (``@tool`` functions,
  ``StructuredTool`` …) as a toolplan tool with the schema LangChain would send a model.
* ``execute_tool_plan_tool(tools)`` is a ``StructuredTool`` for a LangChain or LangGraph agent:
  the model writes one plan of calls to ``tools``; toolplan validates it whole, runs independent
  calls at once, and answers with the output steps' results (and any failures)::

      from toolplan.langchain import execute_tool_plan_tool
      agent = create_agent(model, tools=[execute_tool_plan_tool([search, get_weather])])
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional, Sequence

from langchain_core.tools import BaseTool, StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool

from ._engine import Engine, Report
from ._plan_model import PlanModel, plan_description

__all__ = ["add_tools", "execute_tool_plan_tool"]


def _caller(tool: BaseTool) -> Callable[..., Any]:
    def call(**kwargs: Any) -> Any:
        return tool.invoke(kwargs)

    return call


def add_tools(engine: Engine, tools: Sequence[BaseTool],
              read_only: Optional[bool] = None) -> Engine:
    """Registers each LangChain tool on ``engine`` and returns the engine. Calls run on worker
    threads: calls of different tools overlap, and so do calls of one tool when ``read_only`` says
    it only reads (otherwise a plan's calls of one tool keep their written order)."""
    for tool in tools:
        function = convert_to_openai_tool(tool)["function"]
        parameters = function.get("parameters") or {"type": "object", "properties": {}}
        engine.tool(_caller(tool), name=tool.name, description=tool.description or tool.name,
                    parameters=parameters, read_only=read_only)
    return engine


def _plan(steps: List[Any], output_steps: Optional[List[str]]) -> Dict[str, Any]:
    # LangChain hands over what its schema validated: the steps may be models or dicts.
    return PlanModel.model_validate(
        {"steps": [s.model_dump() if hasattr(s, "model_dump") else s for s in steps],
         "output_steps": output_steps}
    ).model_dump(exclude_none=True)


def execute_tool_plan_tool(
    tools: Sequence[BaseTool],
    engine: Optional[Engine] = None,
    name: str = "execute_tool_plan",
    read_only: Optional[bool] = None,
) -> StructuredTool:
    """``execute_tool_plan`` over ``tools`` as a LangChain ``StructuredTool`` (sync and async).
    ``engine`` sets the limits (default: the CLI's); ``read_only`` is as in ``add_tools``. The
    tool's ``metadata["last_report"]`` holds the last run's ``Report``."""
    engine = add_tools(engine or Engine(), tools, read_only=read_only)
    made: List[StructuredTool] = []

    def finished(report: Report) -> str:
        if made and made[0].metadata is not None:
            made[0].metadata["last_report"] = report
        return report.summary()

    def run(steps: List[Any], output_steps: Optional[List[str]] = None) -> str:
        return finished(engine.run_sync(_plan(steps, output_steps)))

    async def arun(steps: List[Any], output_steps: Optional[List[str]] = None) -> str:
        return finished(await engine.run(_plan(steps, output_steps)))

    plan_tool = StructuredTool.from_function(
        func=run,
        coroutine=arun,
        name=name,
        description=plan_description([(t.name, t.description) for t in tools]),
        args_schema=PlanModel,
        metadata={"engine": engine, "last_report": None},
    )
    made.append(plan_tool)
    return plan_tool
