"""``Engine`` and ``Report``: the Python face of the native engine (``toolplan._toolplan``)."""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
import json
import typing
from typing import Any, Callable, Dict, List, Mapping, Optional, TypeVar, Union, overload

from . import _toolplan
from ._schema import description_of, model_parameters, parameters_schema

__all__ = ["Engine", "Report", "InvalidPlan", "Plan"]

F = TypeVar("F", bound=Callable[..., Any])

#: A plan: a dict in the tool-plan format (``{"steps": [...], "output_steps": [...]}``) or its
#: JSON text.
Plan = Union[Mapping[str, Any], str]

#: The CLI's defaults (``toolplan run``): at most 64 calls at once, 300 s per step, no deadline.
DEFAULT_MAX_CONCURRENCY = 64
DEFAULT_STEP_TIMEOUT = 300.0


class InvalidPlan(ValueError):
    """A plan that does not validate. ``problems`` lists every problem found, all at once."""

    def __init__(self, problems: List[str]) -> None:
        self.problems = list(problems)
        super().__init__("invalid plan: " + "; ".join(self.problems))


class Report:
    """What a run did: the output steps' results, every failure, and when each step ran. Each part
    is read from the engine when first asked for (a run of many steps costs no document that is
    never read)."""

    def __init__(self, run: Any, root: Optional[str] = None) -> None:
        self._run = run
        self._root = root
        self._outputs: Optional[Dict[str, Any]] = None
        self._errors: Optional[Dict[str, str]] = None
        self._document: Optional[str] = None

    @property
    def answer(self) -> Any:
        """For a query plan, the root node's answer (``None`` if it failed)."""
        if self._root is None:
            return None
        return self.outputs.get(self._root)

    @property
    def outputs(self) -> Dict[str, Any]:
        """Output step id → its result (the steps in ``output_steps``, or the last wave's)."""
        if self._outputs is None:
            self._outputs = self._run.outputs()
        return self._outputs

    @property
    def errors(self) -> Dict[str, str]:
        """Step id → why it failed or was skipped."""
        if self._errors is None:
            self._errors = self._run.errors()
        return self._errors

    @property
    def timings(self) -> Dict[str, float]:
        """Step id → seconds it ran (steps that never started are left out)."""
        return dict(self._run.timings())

    @property
    def outcome(self) -> str:
        """``completed``, ``cancelled``, ``deadline_exceeded`` or ``declined``."""
        return self._run.outcome

    @property
    def ok(self) -> bool:
        """Whether the run completed and every step succeeded."""
        return self.outcome == "completed" and not self.errors

    @property
    def elapsed(self) -> float:
        """Wall time of the whole run, in seconds."""
        return self._run.elapsed

    @property
    def waves(self) -> List[List[str]]:
        """The steps by wave (steps of one wave depend on none of each other)."""
        return self._run.waves()

    def summary(self) -> str:
        """The text a model reads: output results, failures, and what the failed steps read."""
        return self._run.summary()

    def to_json(self) -> str:
        """The same JSON document as ``toolplan run --json``."""
        if self._document is None:
            self._document = self._run.document()
        return self._document

    def __repr__(self) -> str:
        return f"Report(outcome={self.outcome!r}, outputs={len(self.outputs)}, errors={len(self.errors)})"


def _plan_text(plan: Plan) -> str:
    if isinstance(plan, str):
        return plan
    if isinstance(plan, Mapping):
        return json.dumps(plan)
    raise TypeError(f"a plan is a dict or a JSON string, not {type(plan).__name__}")


def _converter(hint: Any) -> Optional[Callable[[Any], Any]]:
    """How a JSON value becomes the object a parameter's hint asks for (a pydantic model, a
    dataclass), or ``None`` when the value is passed as it is."""
    if not isinstance(hint, type):
        return None
    validate = getattr(hint, "model_validate", None)
    if callable(validate):
        return validate
    if dataclasses.is_dataclass(hint):
        return lambda v: hint(**v) if isinstance(v, dict) else v
    return None


def _with_conversions(func: Callable[..., Any]) -> Callable[..., Any]:
    """``func``, taking JSON values for the parameters it hints as models or dataclasses."""
    try:
        hints = typing.get_type_hints(func)
    except Exception:
        return func
    conversions = {name: c for name, c in ((n, _converter(h)) for n, h in hints.items()
                                           if n != "return") if c is not None}
    if not conversions:
        return func

    def convert(kwargs: Dict[str, Any]) -> Dict[str, Any]:
        return {k: (conversions[k](v) if k in conversions else v) for k, v in kwargs.items()}

    if inspect.iscoroutinefunction(func):
        @functools.wraps(func)
        async def call_async(**kwargs: Any) -> Any:
            return await func(**convert(kwargs))
        return call_async

    @functools.wraps(func)
    def call(**kwargs: Any) -> Any:
        return func(**convert(kwargs))
    return call


class Engine:
    """toolplan's engine, in-process: validates a plan whole, then runs each step as soon as the
    steps it reads are done, many at once, and returns the output steps' results.

    The limits are the CLI's: ``max_concurrency`` tool calls at once (64), ``step_timeout``
    seconds per call (300; ``None`` for none), ``deadline`` seconds for a whole run (none),
    ``max_steps`` per plan (10,000), ``max_plan_bytes`` of plan text (16 MiB),
    ``max_argument_bytes`` per step's arguments (1 MiB), ``max_output_bytes`` per result (16 MiB),
    ``max_value_depth`` levels of nesting in a step's arguments and result (128; at most 1,000).
    Going past one is a clear error on the plan or the step, never a crash.
    """

    def __init__(
        self,
        *,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
        step_timeout: Optional[float] = DEFAULT_STEP_TIMEOUT,
        deadline: Optional[float] = None,
        max_steps: Optional[int] = None,
        max_plan_bytes: Optional[int] = None,
        max_argument_bytes: Optional[int] = None,
        max_output_bytes: Optional[int] = None,
        max_value_depth: Optional[int] = None,
    ) -> None:
        self._native = _toolplan.NativeEngine(
            max_concurrency=max_concurrency,
            step_timeout=step_timeout,
            deadline=deadline,
            max_steps=max_steps,
            max_plan_bytes=max_plan_bytes,
            max_argument_bytes=max_argument_bytes,
            max_output_bytes=max_output_bytes,
            max_value_depth=max_value_depth,
        )
        self._async_tools: List[str] = []
        #: Warnings about the registered tools' schemas (a schema that contradicts itself is read
        #: one consistent way), as ``(tool, warning)``.
        self.warnings: List[tuple] = []

    @overload
    def tool(self, func: F) -> F: ...

    @overload
    def tool(
        self,
        func: None = None,
        *,
        name: Optional[str] = None,
        description: Optional[str] = None,
        parameters: Any = None,
        read_only: Optional[bool] = None,
        idempotent: Optional[bool] = None,
        destructive: Optional[bool] = None,
    ) -> Callable[[F], F]: ...

    def tool(
        self,
        func: Optional[Callable[..., Any]] = None,
        *,
        name: Optional[str] = None,
        description: Optional[str] = None,
        parameters: Any = None,
        read_only: Optional[bool] = None,
        idempotent: Optional[bool] = None,
        destructive: Optional[bool] = None,
    ) -> Any:
        """Registers a function (plain or ``async def``) as a tool; usable as ``@engine.tool``,
        ``@engine.tool(name=...)`` or ``engine.tool(fn, ...)``. Returns the function unchanged.

        The name defaults to the function's, the description to its docstring's first paragraph,
        the parameters' JSON Schema to what its signature and type hints say; ``parameters`` may
        be a JSON Schema dict or a pydantic model class. ``read_only`` / ``idempotent`` /
        ``destructive`` are hints for the engine (MCP's annotations): identical calls of a
        read-only or idempotent tool in one plan run once.
        """

        def register(fn: Callable[..., Any]) -> Callable[..., Any]:
            if not callable(fn):
                raise TypeError(f"a tool is a function, not {type(fn).__name__}")
            tool_name = name or getattr(fn, "__name__", None)
            if not tool_name or tool_name == "<lambda>":
                raise ValueError("give a name= for a tool that has none")
            schema = parameters
            if schema is None:
                schema = parameters_schema(fn)
            elif not isinstance(schema, Mapping):
                schema = model_parameters(schema)
                if schema is None:
                    raise TypeError("parameters= is a JSON Schema dict or a pydantic model class")
            is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
                getattr(fn, "__call__", None))
            warnings = self._native.register(
                tool_name,
                description if description is not None else description_of(fn),
                json.dumps(schema),
                _with_conversions(fn),
                is_async=is_async,
                read_only=read_only,
                idempotent=idempotent,
                destructive=destructive,
            )
            self.warnings.extend((tool_name, w) for w in warnings)
            if is_async:
                self._async_tools.append(tool_name)
            return fn

        if func is not None:
            return register(func)
        return register

    @property
    def tool_names(self) -> List[str]:
        """The registered tools, in the order they were registered."""
        return list(self._native.tool_names())

    def validate(self, plan: Plan) -> List[str]:
        """Every problem of ``plan`` at once (unknown tools and steps, cycles, arguments that
        break a schema, limits); empty when the plan is sound. Nothing runs."""
        return list(self._native.validate(_plan_text(plan)))

    def run_sync(self, plan: Plan) -> Report:
        """Runs ``plan`` and returns its report; the calling thread waits without the GIL, and
        Ctrl-C cancels the run. With ``async`` tools it runs on a new event loop (from inside a
        running loop, use ``await engine.run(plan)``). Raises ``InvalidPlan`` before anything
        runs."""
        text = _plan_text(plan)
        return self._blocking(lambda: self.run(text),
                              lambda: (self._native.run_blocking(text), None))

    async def run(self, plan: Plan) -> Report:
        """Runs ``plan`` without blocking the event loop; ``async`` tools are awaited on this
        loop, plain ones run on worker threads. Cancelling the awaiting task cancels the run's
        running steps. Raises ``InvalidPlan`` before anything runs."""
        text = _plan_text(plan)
        return await self._awaited(
            lambda loop, finish: (self._native.start(text, loop, finish), None))

    def validate_query_plan(self, plan: Plan, *, synthesizer: str) -> List[str]:
        """Every problem of a query plan (LlamaIndex's ``QueryPlan``: ``{"nodes": [{"id",
        "query_str", "tool_name", "dependencies"}]}``) whose branches call the registered tool
        ``synthesizer`` (arguments ``query`` and ``context``, a list of ``{"query",
        "response"}``); empty when it is sound."""
        return list(self._native.validate_query_plan(_plan_text(plan), synthesizer))

    def run_query_plan_sync(self, plan: Plan, *, synthesizer: str) -> Report:
        """Runs a query plan as ``run_sync`` runs a tool plan: each node is a step (leaves call
        their tool with the node's question, branches the synthesizer with their children's
        answers), independent nodes at once, a shared child once. ``report.answer`` is the
        root's answer."""
        text = _plan_text(plan)
        return self._blocking(
            lambda: self.run_query_plan(text, synthesizer=synthesizer),
            lambda: self._native.run_query_plan_blocking(text, synthesizer))

    async def run_query_plan(self, plan: Plan, *, synthesizer: str) -> Report:
        """``run_query_plan_sync`` without blocking the event loop (see ``run``)."""
        text = _plan_text(plan)
        return await self._awaited(
            lambda loop, finish: self._native.start_query_plan(text, synthesizer, loop, finish))

    def _blocking(self, on_loop: Callable[[], Any], native: Callable[[], Any]) -> Report:
        """A run the calling thread waits for: ``native()`` (the run, the root) without the GIL,
        or, with ``async`` tools, ``on_loop()`` on a new event loop."""
        if self._async_tools:
            try:
                asyncio.get_running_loop()
            except RuntimeError:
                return asyncio.run(on_loop())
            raise RuntimeError(
                "a blocking run was asked for inside a running event loop and the engine has "
                f"async tools ({', '.join(self._async_tools)}): use `await engine.run(plan)`")
        try:
            run, root = native()
        except _toolplan.InvalidPlanError as e:
            raise InvalidPlan(list(e.args[0])) from None
        return Report(run, root)

    async def _awaited(self, start: Callable[[Any, Callable[[Any], None]], Any]) -> Report:
        """A run started by ``start(loop, finish)`` (returning the handle and the root), awaited
        on this loop; cancelling the awaiting task cancels the run."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future = loop.create_future()

        def finish(run: Any) -> None:
            if not done.done():
                done.set_result(run)

        try:
            handle, root = start(loop, finish)
        except _toolplan.InvalidPlanError as e:
            raise InvalidPlan(list(e.args[0])) from None
        try:
            run = await done
        except asyncio.CancelledError:
            handle.cancel()
            raise
        return Report(run, root)


def set_max_worker_threads(max_threads: int) -> int:
    """Sets the most threads plain Python tools run on, process-wide (256 by default; more calls
    at once wait in a queue for a thread), and returns the former maximum."""
    return _toolplan.set_max_worker_threads(max_threads)
