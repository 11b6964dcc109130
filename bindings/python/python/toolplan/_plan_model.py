"""The ``execute_tool_plan`` arguments as a pydantic model, and the tool's description: what the
framework adapters offer a model."""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

from pydantic import BaseModel, Field

__all__ = ["PlanModel", "PlanStep", "plan_description"]


class PlanStep(BaseModel):
    """One tool call of a plan."""

    id: str = Field(description="A short unique id; later steps refer to this step's result "
                                "as \"$ref:<id>\" or to a field of it as \"$ref:<id>.<field>\".")
    tool: str = Field(description="The name of the tool to call.")
    arguments: Dict[str, Any] = Field(
        default_factory=dict,
        description="The tool's arguments; a string \"$ref:<id>.<field>\" is replaced by that "
                    "result before the call.")


class PlanModel(BaseModel):
    """A plan: every tool call the answer needs, written at once."""

    steps: List[PlanStep] = Field(description="The calls; independent ones run in parallel.")
    output_steps: Optional[List[str]] = Field(
        default=None,
        description="The ids whose results you need back (default: the steps nothing reads).")


def plan_description(tools: Sequence[Tuple[str, str]]) -> str:
    """What ``execute_tool_plan`` says to a model: how a plan works, then each tool."""
    listing = "\n".join(f"- {name}: {' '.join((description or '').split())}"
                        for name, description in tools)
    return (
        "Runs a plan of tool calls in one go: write every call the answer needs as a step; a "
        "step's arguments can use an earlier step's result as \"$ref:<step id>\" or "
        "\"$ref:<step id>.<field>\". The plan is checked whole before anything runs, independent "
        "steps run at once, and you get back the results of the output steps (and any failures)."
        f"\n\nTools:\n{listing}"
    )
