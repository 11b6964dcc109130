"""LlamaIndex adapters: LlamaIndex tools in toolplan plans, and toolplan as LlamaIndex tools.

* ``add_tools(engine, tools)`` registers any LlamaIndex ``BaseTool`` (``FunctionTool``,
  ``QueryEngineTool`` …) as a toolplan tool: its name, description and parameter schema.
* ``QueryPlanTool`` is a drop-in for ``llama_index.core.tools.QueryPlanTool``: the same
  constructor, ``from_defaults``, metadata (description and ``QueryPlan`` schema) and answer, but
  the plan is validated whole first (every problem at once), independent nodes run in parallel,
  and a child two branches share runs once. Switching is one import::

      from toolplan.llamaindex import QueryPlanTool   # was: from llama_index.core.tools import …

* ``ExecuteToolPlanTool`` offers ``execute_tool_plan`` to a LlamaIndex agent: the model writes one
  plan of calls to the given tools, and gets back the output steps' results.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Dict, List, Optional, Sequence

from llama_index.core.response_synthesizers import BaseSynthesizer, get_response_synthesizer
from llama_index.core.schema import NodeWithScore, TextNode
from llama_index.core.tools.query_plan import (
    DEFAULT_DESCRIPTION_PREFIX,
    DEFAULT_NAME,
    QueryPlan,
)
from llama_index.core.tools.types import AsyncBaseTool, BaseTool, ToolMetadata, ToolOutput

from ._engine import Engine, Report
from ._plan_model import PlanModel, plan_description

__all__ = ["add_tools", "QueryPlanTool", "ExecuteToolPlanTool"]

#: The name of the synthesizer tool the query plans' branches call (not offered to models).
SYNTHESIZER = "_toolplan_synthesize"


def _result(output: Any) -> Any:
    """What a LlamaIndex tool's ``ToolOutput`` gives a plan: its raw output when that is JSON
    (a dict a later step can refer into), else its text."""
    if isinstance(output, ToolOutput):
        raw = output.raw_output
        if isinstance(raw, (dict, list, str, int, float, bool)):
            try:
                json.dumps(raw)
                return raw
            except (TypeError, ValueError):
                pass
        return output.content
    return output


def add_tools(engine: Engine, tools: Sequence[BaseTool],
              read_only: Optional[bool] = None) -> Engine:
    """Registers each LlamaIndex tool on ``engine`` and returns the engine. Calls run on worker
    threads: calls of different tools overlap, and so do calls of one tool when ``read_only`` says
    it only reads (otherwise a plan's calls of one tool keep their written order)."""
    for tool in tools:
        meta = tool.metadata
        if not meta.name:
            raise ValueError(f"a LlamaIndex tool without a name: {meta.description!r}")
        engine.tool(_caller(tool), name=meta.name, description=meta.description,
                    parameters=meta.get_parameters_dict(), read_only=read_only)
    return engine


def _caller(tool: BaseTool) -> Callable[..., Any]:
    def call(**kwargs: Any) -> Any:
        output = tool.call(**kwargs) if isinstance(tool, AsyncBaseTool) else tool(**kwargs)
        return _result(output)

    return call


def _child_text(response: Any) -> str:
    # LlamaIndex writes a child's response with `str()`; a JSON result read back is the same
    # Python value, so its text is too.
    return response if isinstance(response, str) else str(response)


class QueryPlanTool(AsyncBaseTool):
    """LlamaIndex's query plan tool on toolplan's engine (see the module's documentation)."""

    def __init__(
        self,
        query_engine_tools: List[BaseTool],
        response_synthesizer: BaseSynthesizer,
        name: str,
        description_prefix: str,
        engine: Optional[Engine] = None,
        read_only: bool = True,
    ) -> None:
        self._query_tools_dict = {t.metadata.name: t for t in query_engine_tools}
        self._response_synthesizer = response_synthesizer
        self._name = name
        self._description_prefix = description_prefix
        self._custom_metadata: Optional[ToolMetadata] = None
        # Query engine tools answer questions: read-only, so a plan's leaves on one of them run
        # at once (``read_only=False`` keeps their written order).
        self.engine = add_tools(engine or Engine(), query_engine_tools, read_only=read_only)
        # Synthesis reads its children's answers and changes nothing: branches synthesize at once.
        self.engine.tool(self._synthesize, name=SYNTHESIZER, read_only=True,
                         description="Combines the answers of a node's children.",
                         parameters={"type": "object",
                                     "properties": {"query": {"type": "string"},
                                                    "context": {"type": "array"}},
                                     "required": ["query", "context"]})
        #: The report of the last plan run (steps, timings, errors).
        self.last_report: Optional[Report] = None

    @classmethod
    def from_defaults(
        cls,
        query_engine_tools: List[BaseTool],
        response_synthesizer: Optional[BaseSynthesizer] = None,
        name: Optional[str] = None,
        description_prefix: Optional[str] = None,
        engine: Optional[Engine] = None,
        read_only: bool = True,
    ) -> "QueryPlanTool":
        """As LlamaIndex's ``QueryPlanTool.from_defaults``; ``engine`` sets the limits."""
        return cls(
            query_engine_tools=query_engine_tools,
            response_synthesizer=response_synthesizer or get_response_synthesizer(),
            name=name or DEFAULT_NAME,
            description_prefix=description_prefix or DEFAULT_DESCRIPTION_PREFIX,
            engine=engine,
            read_only=read_only,
        )

    @property
    def metadata(self) -> ToolMetadata:
        if self._custom_metadata is not None:
            return self._custom_metadata
        tools_description = "\n\n".join(
            f"Tool Name: {tool.metadata.name}\nTool Description: {tool.metadata.description} "
            for tool in self._query_tools_dict.values()
        )
        description = f"""\
        {self._description_prefix}\n\n
        {tools_description}
        """
        return ToolMetadata(description, self._name, fn_schema=QueryPlan)

    @metadata.setter
    def metadata(self, value: ToolMetadata) -> None:
        self._custom_metadata = value

    def _synthesize(self, query: str, context: List[Dict[str, Any]]) -> str:
        nodes = [
            NodeWithScore(
                node=TextNode(text=f"Query: {c.get('query', '')}\n"
                                   f"Response: {_child_text(c.get('response'))}\n"),
                score=1.0,
            )
            for c in context
        ]
        return str(self._response_synthesizer.synthesize(query=query, nodes=nodes))

    def _plan_text(self, kwargs: Dict[str, Any]) -> str:
        plan = QueryPlan(**kwargs)
        return plan.model_dump_json()

    def _output(self, kwargs: Dict[str, Any], report: Report) -> ToolOutput:
        self.last_report = report
        if report.answer is None:
            failure = "; ".join(f"{k}: {v}" for k, v in report.errors.items()) or report.outcome
            raise RuntimeError(f"the query plan did not answer: {failure}")
        return ToolOutput(content=_child_text(report.answer), tool_name=self._name,
                          raw_input=kwargs, raw_output=report)

    def call(self, *args: Any, **kwargs: Any) -> ToolOutput:
        """Runs the plan (``QueryPlan`` fields as keyword arguments) and returns the root's
        answer."""
        report = self.engine.run_query_plan_sync(self._plan_text(kwargs), synthesizer=SYNTHESIZER)
        return self._output(kwargs, report)

    async def acall(self, *args: Any, **kwargs: Any) -> ToolOutput:
        report = await self.engine.run_query_plan(self._plan_text(kwargs), synthesizer=SYNTHESIZER)
        return self._output(kwargs, report)


class ExecuteToolPlanTool(AsyncBaseTool):
    """``execute_tool_plan`` as a LlamaIndex tool over the given tools: one call runs a whole
    plan; the model reads the output steps' results (and any failures)."""

    def __init__(self, tools: Sequence[BaseTool], engine: Optional[Engine] = None,
                 name: str = "execute_tool_plan", read_only: Optional[bool] = None) -> None:
        self.engine = add_tools(engine or Engine(), tools, read_only=read_only)
        self._metadata = ToolMetadata(
            description=plan_description([(t.metadata.name, t.metadata.description)
                                          for t in tools]),
            name=name, fn_schema=PlanModel)
        #: The report of the last plan run.
        self.last_report: Optional[Report] = None

    @property
    def metadata(self) -> ToolMetadata:
        return self._metadata

    def _plan(self, kwargs: Dict[str, Any]) -> Dict[str, Any]:
        return PlanModel(**kwargs).model_dump(exclude_none=True)

    def call(self, *args: Any, **kwargs: Any) -> ToolOutput:
        report = self.engine.run_sync(self._plan(kwargs))
        self.last_report = report
        return ToolOutput(content=report.summary(), tool_name=self._metadata.name or "",
                          raw_input=kwargs, raw_output=report)

    async def acall(self, *args: Any, **kwargs: Any) -> ToolOutput:
        report = await self.engine.run(self._plan(kwargs))
        self.last_report = report
        return ToolOutput(content=report.summary(), tool_name=self._metadata.name or "",
                          raw_input=kwargs, raw_output=report)
