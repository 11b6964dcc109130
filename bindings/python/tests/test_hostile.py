"""Plans and tools that try to break the engine, played black-box: each limit is a clear error on
the plan or the step, never a crash, a hang or an interpreter that stops."""

import json
import subprocess
import sys
import time

import pytest

import toolplan


def engine_with_echo(**settings) -> toolplan.Engine:
    engine = toolplan.Engine(**settings)

    @engine.tool(read_only=True)
    def echo(text: str = "") -> str:
        return text

    return engine


def test_too_many_steps_is_a_problem():
    engine = engine_with_echo(max_steps=5)
    plan = {"steps": [{"id": f"s{i}", "tool": "echo", "arguments": {}} for i in range(6)]}
    problems = engine.validate(plan)
    assert problems and "6" in problems[0] and "5" in problems[0], problems
    with pytest.raises(toolplan.InvalidPlan):
        engine.run_sync(plan)


def test_plan_text_past_the_size_limit_is_refused_before_parsing():
    engine = engine_with_echo(max_plan_bytes=1000)
    plan = {"steps": [{"id": "a", "tool": "echo", "arguments": {"text": "x" * 2000}}]}
    problems = engine.validate(plan)
    assert len(problems) == 1 and "1000" in problems[0], problems


def test_deeply_nested_plan_text_is_a_problem_not_a_crash():
    engine = engine_with_echo()
    deep = "[" * 100_000 + "]" * 100_000
    text = '{"steps": [{"id": "a", "tool": "echo", "arguments": {"text": ' + deep + "}}]}"
    problems = engine.validate(text)
    assert problems, "a plan nested 100,000 levels deep validated"


def test_cycles_and_duplicate_ids_are_problems():
    engine = engine_with_echo()
    problems = engine.validate({"steps": [
        {"id": "a", "tool": "echo", "arguments": {"text": "$ref:b"}},
        {"id": "b", "tool": "echo", "arguments": {"text": "$ref:a"}},
        {"id": "b", "tool": "echo", "arguments": {}},
    ]})
    assert any("cycle" in p.lower() for p in problems), problems
    assert any("duplicate" in p.lower() for p in problems), problems


def test_a_tool_that_returns_a_cycle_or_a_deep_value_fails_its_step():
    engine = toolplan.Engine()

    @engine.tool
    def cyclic() -> list:
        a: list = []
        a.append(a)
        return a

    @engine.tool
    def deep() -> list:
        v: list = []
        for _ in range(100_000):
            v = [v]
        return v

    @engine.tool
    def odd() -> object:
        class Thing:
            def __str__(self) -> str:
                return "a thing"
        return {"thing": Thing()}

    report = engine.run_sync({"steps": [
        {"id": "c", "tool": "cyclic", "arguments": {}},
        {"id": "d", "tool": "deep", "arguments": {}},
        {"id": "o", "tool": "odd", "arguments": {}}], "output_steps": ["o"]})
    assert "not JSON" in report.errors["c"], report.errors
    assert "not JSON" in report.errors["d"], report.errors
    assert report.outputs == {"o": {"thing": "a thing"}}


def test_the_nesting_limit_is_the_engines_and_can_be_changed():
    def nested(levels: int) -> list:
        v: list = []
        for _ in range(levels):
            v = [v]
        return v

    for limit, ok, too_deep in [(None, 100, 200), (8, 6, 12), (600, 500, 700)]:
        engine = toolplan.Engine(max_value_depth=limit)

        @engine.tool
        def deep(levels: int) -> list:
            return nested(levels)

        report = engine.run_sync({"steps": [
            {"id": "ok", "tool": "deep", "arguments": {"levels": ok}},
            {"id": "deep", "tool": "deep", "arguments": {"levels": too_deep}}],
            "output_steps": ["ok"]})
        assert "nested deeper" in report.errors["deep"], (limit, report.errors)
        assert "ok" not in report.errors, (limit, report.errors)
        assert report.outputs["ok"] == nested(ok)


WORKER_LIMIT_SCRIPT = """
import sys, time, toolplan
limit = int(sys.argv[1])
if limit:
    assert toolplan.set_max_worker_threads(limit) == 256
engine = toolplan.Engine()

@engine.tool(read_only=True)
def nap(i: int) -> int:
    time.sleep(0.3)
    return i

started = time.monotonic()
report = engine.run_sync({"steps": [{"id": f"n{i}", "tool": "nap", "arguments": {"i": i}}
                                    for i in range(6)]})
assert report.outputs == {f"n{i}": i for i in range(6)}, report.errors
print(time.monotonic() - started)
"""


def test_the_worker_thread_limit_can_be_changed_and_calls_then_wait_their_turn():
    # A fresh process each, since the limit is the process's: six 0.3 s calls at once take one
    # round with the default limit and three with two threads.
    def took(limit: int) -> float:
        out = subprocess.run([sys.executable, "-c", WORKER_LIMIT_SCRIPT, str(limit)],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        return float(out.stdout.strip())

    assert took(0) < 0.8
    assert took(2) >= 0.85
    with pytest.raises(ValueError):
        toolplan.set_max_worker_threads(0)


def test_an_output_past_the_limit_fails_its_step():
    engine = toolplan.Engine(max_output_bytes=1000)

    @engine.tool
    def big() -> str:
        return "x" * 5000

    report = engine.run_sync({"steps": [{"id": "b", "tool": "big", "arguments": {}}]})
    assert "1000" in report.errors["b"] or "limit" in report.errors["b"], report.errors


def test_a_tool_that_raises_base_exceptions_does_not_stop_the_interpreter():
    engine = toolplan.Engine()

    @engine.tool
    def exits() -> None:
        raise SystemExit(3)

    @engine.tool
    def interrupts() -> None:
        raise KeyboardInterrupt()

    report = engine.run_sync({"steps": [{"id": "e", "tool": "exits", "arguments": {}},
                                        {"id": "i", "tool": "interrupts", "arguments": {}}]})
    assert report.errors["e"].startswith("SystemExit"), report.errors
    assert report.errors["i"].startswith("KeyboardInterrupt"), report.errors


def test_a_deadline_ends_the_whole_run():
    engine = toolplan.Engine(deadline=0.3)

    @engine.tool
    def slow() -> str:
        time.sleep(1.5)
        return "late"

    started = time.monotonic()
    report = engine.run_sync({"steps": [{"id": "s", "tool": "slow", "arguments": {}}]})
    assert time.monotonic() - started < 1.2
    assert report.outcome == "deadline_exceeded"
    assert "s" in report.errors


@pytest.mark.parametrize("settings", [
    {"max_concurrency": 0}, {"step_timeout": -1.0}, {"step_timeout": float("nan")},
    {"deadline": float("inf")}, {"max_steps": 0}, {"max_value_depth": 0},
    {"max_value_depth": 1_000_000},
])
def test_bad_settings_are_value_errors(settings):
    with pytest.raises(ValueError):
        toolplan.Engine(**settings)


def test_bad_tools_are_refused_when_registered():
    engine = engine_with_echo()
    with pytest.raises(ValueError, match="already registered"):
        engine.tool(lambda text="": text, name="echo")
    with pytest.raises(ValueError):
        engine.tool(lambda: None, name="bad", parameters={"type": "object", "properties": 5})
    with pytest.raises(TypeError):
        engine.tool(42, name="number")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="name="):
        engine.tool(lambda: None)
    with pytest.raises(TypeError):
        engine.validate(["not", "a", "plan"])  # type: ignore[arg-type]


def test_a_plan_from_json_text_with_garbage_is_a_problem():
    engine = engine_with_echo()
    for text in ["", "{", "null", "[]", '{"steps": 5}', "\x00\x01"]:
        assert engine.validate(text), text
    assert json.loads(engine_with_echo().run_sync(
        {"steps": [{"id": "a", "tool": "echo", "arguments": {"text": "ok"}}]}).to_json())
