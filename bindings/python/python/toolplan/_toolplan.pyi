"""Type stubs of the native module (the engine in Rust). Use ``toolplan.Engine``, not this."""

from typing import Any, Callable, Dict, List, Optional, Tuple

__version__: str

def set_max_worker_threads(max: int) -> int: ...

class InvalidPlanError(ValueError):
    """A plan that does not validate; ``args[0]`` is the list of every problem."""

class RunHandle:
    """A run started with ``NativeEngine.start``."""

    def cancel(self) -> None: ...
    @property
    def cancelled(self) -> bool: ...

class NativeRun:
    """A finished run; ``toolplan.Report`` reads it."""

    def outputs(self) -> Dict[str, Any]: ...
    def errors(self) -> Dict[str, str]: ...
    def timings(self) -> List[Tuple[str, float]]: ...
    @property
    def outcome(self) -> str: ...
    @property
    def elapsed(self) -> float: ...
    def waves(self) -> List[List[str]]: ...
    def document(self) -> str: ...
    def summary(self) -> str: ...

class NativeEngine:
    def __init__(
        self,
        *,
        max_concurrency: Optional[int] = None,
        step_timeout: Optional[float] = None,
        deadline: Optional[float] = None,
        max_steps: Optional[int] = None,
        max_plan_bytes: Optional[int] = None,
        max_argument_bytes: Optional[int] = None,
        max_output_bytes: Optional[int] = None,
        max_value_depth: Optional[int] = None,
    ) -> None: ...
    def register(
        self,
        name: str,
        description: str,
        parameters: str,
        func: Callable[..., Any],
        *,
        is_async: bool,
        read_only: Optional[bool] = None,
        idempotent: Optional[bool] = None,
        destructive: Optional[bool] = None,
    ) -> List[str]: ...
    def tool_names(self) -> List[str]: ...
    def validate(self, plan: str) -> List[str]: ...
    def run_blocking(self, plan: str) -> NativeRun: ...
    def start(
        self, plan: str, event_loop: Any, on_done: Callable[[NativeRun], None]
    ) -> RunHandle: ...
    def validate_query_plan(self, plan: str, synthesizer: str) -> List[str]: ...
    def run_query_plan_blocking(self, plan: str, synthesizer: str) -> Tuple[NativeRun, str]: ...
    def start_query_plan(
        self, plan: str, synthesizer: str, event_loop: Any, on_done: Callable[[NativeRun], None]
    ) -> Tuple[RunHandle, str]: ...
