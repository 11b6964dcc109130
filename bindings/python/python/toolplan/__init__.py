"""toolplan: one plan of tool calls, validated whole and run in parallel by a Rust engine.

An LLM that calls tools one round trip at a time re-sends its whole context for every call. With
a plan, the model writes every call at once, arguments referring to earlier results
(``"$ref:step.field"``); toolplan checks all of it before anything runs, runs each step as soon as
what it reads is ready, and returns only the results asked for.

>>> import toolplan
>>> engine = toolplan.Engine()
>>> @engine.tool
... def add(a: int, b: int) -> int:
...     "Adds two numbers."
...     return a + b
>>> engine.run_sync({"steps": [
...     {"id": "x", "tool": "add", "arguments": {"a": 1, "b": 2}},
...     {"id": "y", "tool": "add", "arguments": {"a": "$ref:x", "b": 10}}],
...     "output_steps": ["y"]}).outputs
{'y': 13}
"""

from ._engine import Engine, InvalidPlan, Plan, Report, set_max_worker_threads
from ._toolplan import __version__

__all__ = ["Engine", "InvalidPlan", "Plan", "Report", "set_max_worker_threads", "__version__"]
