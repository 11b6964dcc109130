"""The Python package against its own native engine: registration, validation, runs (sync and
async), parallelism, fail-forward, cancellation and timeouts."""

import _thread
import asyncio
import json
import threading
import time
from typing import Dict, List, Literal, Optional

import pytest

import toolplan


def make_engine(**settings) -> toolplan.Engine:
    engine = toolplan.Engine(**settings)

    @engine.tool
    def get_user(name: str) -> dict:
        """A user's city.

        More text that is not the description."""
        return {"name": name, "city": {"alice": "Tokyo", "bob": "Paris"}[name.lower()]}

    @engine.tool(name="add", read_only=True)
    def add_numbers(a: float, b: float = 0) -> float:
        "Adds two numbers."
        return a + b

    return engine


CHAIN = {
    "steps": [
        {"id": "u", "tool": "get_user", "arguments": {"name": "Alice"}},
        {"id": "n", "tool": "add", "arguments": {"a": 1, "b": 2}},
        {"id": "m", "tool": "add", "arguments": {"a": "$ref:n", "b": 10}},
    ],
    "output_steps": ["u", "m"],
}


def test_a_decorated_function_is_a_tool_with_its_name_doc_and_hints():
    engine = make_engine()
    assert engine.tool_names == ["get_user", "add"]
    report = engine.run_sync(CHAIN)
    assert report.outputs == {"u": {"name": "Alice", "city": "Tokyo"}, "m": 13}
    assert report.errors == {}
    assert report.ok and report.outcome == "completed"


def test_schemas_come_from_type_hints():
    from toolplan._schema import description_of, parameters_schema

    def f(city: str, days: int, units: Literal["c", "f"] = "c", tags: Optional[List[str]] = None,
          extra: Dict[str, float] = {}) -> None:  # noqa: B006
        """Forecast.

        Details."""

    schema = parameters_schema(f)
    assert schema["required"] == ["city", "days"]
    assert schema["properties"]["city"] == {"type": "string"}
    assert schema["properties"]["days"] == {"type": "integer"}
    assert schema["properties"]["units"] == {"enum": ["c", "f"], "default": "c"}
    assert schema["properties"]["tags"] == {"type": "array", "items": {"type": "string"},
                                            "default": None}
    assert schema["properties"]["extra"]["additionalProperties"] == {"type": "number"}
    assert description_of(f) == "Forecast."


def test_a_wrong_argument_type_is_a_problem_before_anything_runs():
    engine = make_engine()
    problems = engine.validate({"steps": [
        {"id": "a", "tool": "get_user", "arguments": {"name": 3}},
        {"id": "b", "tool": "nope", "arguments": {}},
        {"id": "c", "tool": "add", "arguments": {"a": "$ref:missing"}},
    ]})
    assert len(problems) == 3, problems
    assert any("nope" in p for p in problems)
    assert any("missing" in p for p in problems)
    with pytest.raises(toolplan.InvalidPlan) as caught:
        engine.run_sync({"steps": [{"id": "a", "tool": "nope", "arguments": {}}]})
    assert caught.value.problems == ["Unknown tool 'nope' in step 'a'"]
    assert engine.validate(CHAIN) == []
    assert engine.validate(json.dumps(CHAIN)) == []


def test_an_exception_fails_its_step_and_skips_what_reads_it():
    engine = make_engine()

    @engine.tool
    def boom(x: int) -> int:
        raise KeyError("no such thing")

    report = engine.run_sync({"steps": [
        {"id": "b", "tool": "boom", "arguments": {"x": 1}},
        {"id": "after", "tool": "add", "arguments": {"a": "$ref:b"}},
        {"id": "fine", "tool": "add", "arguments": {"a": 2}},
    ], "output_steps": ["fine"]})
    assert report.outputs == {"fine": 2}
    assert report.errors["b"] == "KeyError: 'no such thing'"
    assert "b" in report.errors["after"]
    assert not report.ok


def test_the_report_is_the_cli_document():
    report = make_engine().run_sync(CHAIN)
    doc = json.loads(report.to_json())
    assert set(doc) == {"outputs", "errors", "waves", "elapsed_ms", "steps", "outcome"}
    assert doc["waves"] == [["u", "n"], ["m"]]
    assert set(report.timings) == {"u", "n", "m"}
    assert all(t >= 0 for t in report.timings.values())
    assert "Tokyo" in report.summary()


def test_independent_plain_functions_overlap():
    engine = toolplan.Engine()

    # Steps on one tool that may change things keep their written order; a read-only tool's
    # steps, and steps on different tools, run at once.
    @engine.tool(read_only=True)
    def slow(n: int) -> int:
        time.sleep(0.4)
        return n

    plan = {"steps": [{"id": f"s{i}", "tool": "slow", "arguments": {"n": i}} for i in range(4)]}
    started = time.monotonic()
    report = engine.run_sync(plan)
    took = time.monotonic() - started
    assert report.outputs == {f"s{i}": i for i in range(4)}
    assert took < 1.2, f"4 × 0.4 s took {took:.2f} s: the calls did not overlap"


def test_steps_on_a_tool_that_may_change_things_keep_their_order():
    engine = toolplan.Engine()
    calls = []

    @engine.tool
    def write(n: int) -> int:
        calls.append(("start", n))
        time.sleep(0.2)
        calls.append(("end", n))
        return n

    @engine.tool
    def other() -> str:
        time.sleep(0.6)
        return "other"

    started = time.monotonic()
    report = engine.run_sync({"steps": [
        {"id": "o", "tool": "other", "arguments": {}},
        {"id": "w1", "tool": "write", "arguments": {"n": 1}},
        {"id": "w2", "tool": "write", "arguments": {"n": 2}}]})
    took = time.monotonic() - started
    assert calls == [("start", 1), ("end", 1), ("start", 2), ("end", 2)]
    # 0.6 s when `other` overlaps the writes, 1.0 s when nothing does.
    assert report.ok and took < 0.85, took


def test_async_tools_run_on_the_callers_loop_and_overlap():
    engine = toolplan.Engine()
    loops = []

    @engine.tool(read_only=True)
    async def wait(n: int) -> int:
        loops.append(asyncio.get_running_loop())
        await asyncio.sleep(0.4)
        return n * 2

    async def main():
        plan = {"steps": [{"id": f"w{i}", "tool": "wait", "arguments": {"n": i}}
                          for i in range(5)]}
        started = time.monotonic()
        report = await engine.run(plan)
        return report, time.monotonic() - started, asyncio.get_running_loop()

    report, took, loop = asyncio.run(main())
    assert report.outputs == {f"w{i}": i * 2 for i in range(5)}
    assert took < 1.2, took
    assert loops and all(lp is loop for lp in loops)


def test_run_sync_starts_a_loop_for_async_tools_and_refuses_inside_one():
    engine = toolplan.Engine()

    @engine.tool
    async def double(n: int) -> int:
        return n * 2

    plan = {"steps": [{"id": "d", "tool": "double", "arguments": {"n": 4}}]}
    assert engine.run_sync(plan).outputs == {"d": 8}

    async def inside():
        engine.run_sync(plan)

    with pytest.raises(RuntimeError, match="await engine.run"):
        asyncio.run(inside())


def test_cancelling_the_awaiting_task_cancels_running_steps():
    engine = toolplan.Engine()
    seen = {}

    @engine.tool
    async def forever() -> str:
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            seen["cancelled"] = time.monotonic()
            raise
        return "done"

    async def main():
        task = asyncio.ensure_future(engine.run({"steps": [
            {"id": "f", "tool": "forever", "arguments": {}}]}))
        await asyncio.sleep(0.2)
        cancelled_at = time.monotonic()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        for _ in range(50):
            if "cancelled" in seen:
                break
            await asyncio.sleep(0.02)
        return cancelled_at

    cancelled_at = asyncio.run(main())
    assert "cancelled" in seen, "the tool's task was not cancelled"
    assert seen["cancelled"] - cancelled_at < 1.0


def test_a_step_that_takes_too_long_times_out_alone():
    engine = toolplan.Engine(step_timeout=0.3)

    @engine.tool
    async def slow() -> str:
        await asyncio.sleep(30)
        return "late"

    @engine.tool
    def quick() -> str:
        return "ok"

    started = time.monotonic()
    report = engine.run_sync({"steps": [{"id": "s", "tool": "slow", "arguments": {}},
                                        {"id": "q", "tool": "quick", "arguments": {}}],
                              "output_steps": ["q"]})
    assert time.monotonic() - started < 3
    assert report.outputs == {"q": "ok"}
    assert "timed out" in report.errors["s"]


def test_ctrl_c_stops_a_blocking_run():
    engine = toolplan.Engine()

    @engine.tool
    def sleepy() -> str:
        time.sleep(2)
        return "late"

    timer = threading.Timer(0.3, _thread.interrupt_main)
    timer.start()
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        engine.run_sync({"steps": [{"id": "s", "tool": "sleepy", "arguments": {}}]})
    assert time.monotonic() - started < 1.5
    timer.cancel()


def test_pydantic_and_dataclass_parameters():
    import dataclasses

    pydantic = pytest.importorskip("pydantic")

    class Order(pydantic.BaseModel):
        item: str
        quantity: int = 1

    @dataclasses.dataclass
    class Address:
        city: str

    engine = toolplan.Engine()

    @engine.tool
    def place(order: Order, to: Address) -> str:
        """Places an order."""
        assert isinstance(order, Order) and isinstance(to, Address)
        return f"{order.quantity} × {order.item} to {to.city}"

    @engine.tool(parameters=Order)
    def price(item: str, quantity: int = 1) -> float:
        return 2.5 * quantity

    report = engine.run_sync({"steps": [
        {"id": "p", "tool": "place",
         "arguments": {"order": {"item": "tea", "quantity": 2}, "to": {"city": "Oslo"}}},
        {"id": "q", "tool": "price", "arguments": {"item": "tea", "quantity": 4}}]})
    assert report.outputs == {"p": "2 × tea to Oslo", "q": 10.0}
    assert engine.validate({"steps": [
        {"id": "p", "tool": "place", "arguments": {"order": {"quantity": 2}, "to": {}}}]})


def test_results_cross_as_json_values():
    import dataclasses
    import datetime

    engine = toolplan.Engine()

    @dataclasses.dataclass
    class Point:
        x: int

    @engine.tool
    def values() -> dict:
        return {"tuple": (1, 2), 3: "int key", None: "none key", "big": 2**70, "nested": [{"a": None}],
                "flag": True, "when": datetime.date(2026, 11, 27), "point": Point(1)}

    @engine.tool
    def nan() -> float:
        return float("nan")

    report = engine.run_sync({"steps": [{"id": "v", "tool": "values", "arguments": {}},
                                        {"id": "n", "tool": "nan", "arguments": {}}],
                              "output_steps": ["v"]})
    v = report.outputs["v"]
    # As json.dumps(default=str) would write them.
    assert v["3"] == "int key" and v["null"] == "none key" and v["flag"] is True
    assert v["big"] == float(2**70)
    assert v["nested"] == [{"a": None}]
    assert v["when"] == "2026-11-27" and v["point"] == str(Point(1))
    assert v["tuple"] == [1, 2]
    assert "not JSON" in report.errors["n"], report.errors


def test_arguments_arrive_as_python_values():
    engine = toolplan.Engine()
    seen = {}

    @engine.tool
    def take(a: dict, b: list, c: float, d: Optional[str] = None) -> bool:
        seen.update(a=a, b=b, c=c, d=d)
        return True

    engine.run_sync({"steps": [{"id": "t", "tool": "take", "arguments": {
        "a": {"x": [1, 2.5, None, True]}, "b": [], "c": 1e300, "d": "é"}}]})
    assert seen == {"a": {"x": [1, 2.5, None, True]}, "b": [], "c": 1e300, "d": "é"}


def test_calls_overlap_when_a_worker_thread_is_already_idle():
    # Calls first leave idle worker threads; more calls at once than there are idle threads then
    # need new threads, not a wait behind the others (CI saw two 0.5 s calls take 1.0 s).
    engine = toolplan.Engine()

    @engine.tool(read_only=True)
    def nap(s: float) -> float:
        time.sleep(s)
        return s

    def at_once(n: int, s: float) -> float:
        started = time.monotonic()
        report = engine.run_sync({"steps": [{"id": f"n{i}", "tool": "nap", "arguments": {"s": s}}
                                            for i in range(n)]})
        assert report.ok
        return time.monotonic() - started

    at_once(2, 0.05)
    for _ in range(3):
        took = at_once(6, 0.3)
        assert took < 0.5, f"six 0.3 s calls took {took:.2f} s"


def test_a_tool_that_was_quick_and_turns_slow_still_overlaps_and_times_out():
    # A tool whose calls have been quick has its results waited for on the calling thread, but
    # only briefly: calls that turn slow still run at once, and their step timeout still holds.
    engine = toolplan.Engine(step_timeout=0.5)

    @engine.tool(read_only=True)
    def nap(s: float, tag: int = 0) -> float:
        time.sleep(s)
        return s

    warm = engine.run_sync({"steps": [{"id": f"w{i}", "tool": "nap", "arguments": {"s": 0, "tag": i}}
                                      for i in range(20)]})
    assert warm.ok
    started = time.monotonic()
    report = engine.run_sync({"steps": [{"id": f"n{i}", "tool": "nap", "arguments": {"s": 0.3, "tag": i}}
                                        for i in range(4)]})
    took = time.monotonic() - started
    assert report.ok, report.errors
    assert took < 0.9, f"four 0.3 s calls of a tool that was quick took {took:.2f} s"

    engine.run_sync({"steps": [{"id": f"w{i}", "tool": "nap", "arguments": {"s": 0, "tag": i}}
                               for i in range(20)]})
    started = time.monotonic()
    report = engine.run_sync({"steps": [{"id": "long", "tool": "nap", "arguments": {"s": 3}},
                                        {"id": "q", "tool": "nap", "arguments": {"s": 0, "tag": 1}}],
                              "output_steps": ["q"]})
    assert time.monotonic() - started < 2
    assert "timed out" in report.errors["long"]
    assert report.outputs == {"q": 0}


def test_long_chains_of_quick_calls_are_right():
    engine = toolplan.Engine(max_steps=5000)

    @engine.tool
    def inc(n: int) -> int:
        return n + 1

    steps = [{"id": "s0", "tool": "inc", "arguments": {"n": 0}}]
    steps += [{"id": f"s{i}", "tool": "inc", "arguments": {"n": f"$ref:s{i - 1}"}} for i in range(1, 3000)]
    report = engine.run_sync({"steps": steps, "output_steps": ["s2999"]})
    assert report.outputs == {"s2999": 3000}
    report = asyncio.run(engine.run({"steps": steps, "output_steps": ["s2999"]}))
    assert report.outputs == {"s2999": 3000}
