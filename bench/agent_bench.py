#!/usr/bin/env python3
"""Agent benchmark: the same multi-tool tasks answered with tool planning and without, side by side.

Each task in bench/agent_tasks.json is asked through `toolplan ask --json` in each mode: plan-only
(only execute_tool_plan is offered, so every tool use is a plan), plan-answer (plan-only, and a plan
may end with an `answer` step whose text is the answer: a plan that succeeds costs one model call),
plan (the planner beside the
individual tools) and no-plan (one model round-trip per tool call, several calls per turn allowed). The answer
is checked against the task's regular expressions. Reported per task, per kind of task and in total:
model calls, input tokens, output tokens, wall time of the interaction (model load excluded), success.
An interaction that runs out of turns fails, and what it cost still counts in the totals.

Kinds: `chain` (a directory lookup whose result the next call needs: get_user -> get_weather, often
-> calculator), `compute` (weather lookups, then a calculation on them), `parallel` (independent
lookups answered from their results).

Usage: python3 bench/agent_bench.py [--model local] [--bin PATH] [--tasks FILE] [--out FILE] [--limit N] [--kinds K,…]
       [--modes plan-answer,plan-answer/no-stream,plan-answer/compact,plan-answer/results] [--tool-latency SECS]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


MODE_FLAGS = {"plan-only": ["--plan-only"], "plan-answer": ["--plan-only", "--answer-in-plan"],
              "plan": ["--plan-beside"], "no-plan": ["--no-plan"]}


def flaky_config(binary, tools, directory):
    """A configuration whose one MCP server is the demo tools behind bench/flaky_proxy.py, which
    fails the first call of each of `tools`."""
    path = os.path.join(directory, "flaky.toml")
    proxy = [sys.executable, os.path.join(HERE, "flaky_proxy.py")]
    for tool in tools:
        proxy += ["--fail-first", tool]
    proxy += ["--", os.path.abspath(binary), "mcp", "--tools", "demo", "--expose-tools"]
    with open(path, "w") as f:
        f.write("[[mcp_servers]]\nname = \"demo\"\n")
        f.write(f"command = {json.dumps(proxy[0])}\nargs = {json.dumps(proxy[1:])}\n")
    return path


def run(binary, model, question, mode, timeout, config=None, latency_config=None, transcript=None):
    tools = ["--tools", "none", "--config", config] if config else ["--tools", "demo"]
    if latency_config and not config:
        tools += ["--config", latency_config]
    # `MODE/no-stream`: plans run only once the whole reply is written; `MODE/compact`: the
    # answer turn after a plan is asked compactly (--compact-answer); `MODE/results`: a plan that
    # succeeds without an answer of its own answers with its results (--results-answer).
    mode, *options = mode.split("/")
    # `plan-only:FORM` (and `plan-answer:FORM`): the planner lists the tools in that form.
    base, _, listing = mode.partition(":")
    # `MODE/repairs=N`: plans sent back to be fixed up to N times (--repairs N).
    flags = MODE_FLAGS[base] + (["--plan-listing", listing] if listing else [])
    for o in options:
        name, _, value = o.partition("=")
        flags += {"no-stream": ["--no-stream"], "compact": ["--compact-answer"], "results": ["--results-answer"],
                  "repairs": ["--repairs", value]}[name]
    cmd = [binary, "ask", question, "--model", model, "--json"] + tools + flags
    if transcript:
        cmd.append("--verbose")
    started = time.monotonic()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired as e:
        if transcript:
            with open(transcript, "w") as f:
                f.write(e.stderr.decode(errors="replace") if isinstance(e.stderr, bytes) else (e.stderr or ""))
        return {"error": f"timed out after {timeout}s", "wall_s": time.monotonic() - started}
    wall = time.monotonic() - started
    if transcript:
        with open(transcript, "w") as f:
            f.write(proc.stderr)
    if proc.returncode != 0:
        error = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"
        try:
            # An interaction that ran out of turns still reports what it cost.
            out = json.loads(proc.stdout)
            if isinstance(out, dict) and "llm_calls" in out:
                out.update({"error": error, "wall_s": wall, "answer": out.get("answer") or ""})
                return out
        except json.JSONDecodeError:
            pass
        return {"error": error, "wall_s": wall}
    try:
        out = json.loads(proc.stdout)
    except json.JSONDecodeError:
        return {"error": "stdout was not JSON", "wall_s": wall}
    out["wall_s"] = wall
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="local")
    target = os.environ.get("CARGO_TARGET_DIR", os.path.expanduser("~/.cache/toolplan/target"))
    ap.add_argument("--bin", default=os.path.join(target, "release", "toolplan"))
    ap.add_argument("--tasks", default=os.path.join(HERE, "agent_tasks.json"))
    ap.add_argument("--out", default=os.path.join(HERE, "results", "agent.txt"))
    ap.add_argument("--limit", type=int, default=0, help="only the first N tasks")
    ap.add_argument("--kinds", default="", help="only tasks of these kinds (comma-separated: chain, compute, parallel)")
    ap.add_argument("--timeout", type=int, default=900, help="seconds per question")
    ap.add_argument("--modes", default="plan-only,no-plan",
                    help="comma-separated: plan-only (only execute_tool_plan offered), plan-answer (plan-only, plans may end with the answer), plan (planner beside the tools), no-plan; plan-only:FORM and plan-answer:FORM list the tools as --plan-listing FORM")
    ap.add_argument("--tool-latency", type=float, default=0,
                    help="seconds the demo lookups (get_weather, get_user) take, as a remote API would "
                         "(toolplan.toml's demo_latency); MODE/no-stream runs plans only once written; MODE/compact asks the answer after a plan compactly (--compact-answer); MODE/results answers with a plan's results (--results-answer); MODE/repairs=N sends plans back to be fixed up to N times (--repairs N)")
    ap.add_argument("--transcripts", default="",
                    help="a directory: each ask runs with --verbose and its conversation is kept there as TASK.MODE.txt")
    ap.add_argument("--flaky", default="",
                    help="comma-separated tools that fail on their first call in each interaction "
                         "(a busy service: the demo tools served through bench/flaky_proxy.py)")
    args = ap.parse_args()
    config = None
    if args.flaky:
        config = flaky_config(args.bin, [t for t in args.flaky.split(",") if t],
                              tempfile.mkdtemp(prefix="toolplan-flaky-"))

    latency_config = None
    if args.tool_latency > 0:
        latency_config = os.path.join(tempfile.mkdtemp(prefix="toolplan-latency-"), "toolplan.toml")
        with open(latency_config, "w") as f:
            f.write(f'demo_latency = "{int(args.tool_latency * 1000)}ms"\n')

    tasks = json.load(open(args.tasks))
    if args.kinds:
        kinds = set(args.kinds.split(","))
        tasks = [t for t in tasks if t["kind"] in kinds]
    if args.limit:
        tasks = tasks[: args.limit]
    lines = []

    def emit(line=""):
        print(line, flush=True)
        lines.append(line)

    tools = f"demo, behind flaky_proxy.py failing the first call of {args.flaky}" if args.flaky else "demo"
    emit(f"# agent benchmark: {len(tasks)} tasks, model {args.model}, tools {tools}")
    emit(f"# date: {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}")
    emit(f"# command: python3 bench/agent_bench.py --model {args.model} --modes {args.modes}" + (f" --limit {args.limit}" if args.limit else "") + (f" --kinds {args.kinds}" if args.kinds else "")
         + (f" --flaky {args.flaky}" if args.flaky else "")
         + (f" --tool-latency {args.tool_latency:g}" if args.tool_latency else ""))
    emit()
    emit(f"{'task':26} {'mode':11} {'ok':>3} {'calls':>5} {'in tok':>7} {'out tok':>7} {'plans':>5} {'reused':>6} {'secs':>7}  answer")
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    for m in modes:
        base, *options = m.split("/")
        if base.partition(":")[0] not in MODE_FLAGS or any(o not in ("no-stream", "compact", "results") for o in options):
            ap.error(f"unknown mode {m!r}")
    kinds = sorted({t.get("kind", "-") for t in tasks})

    def zero():
        return {"calls": 0, "in": 0, "out": 0, "secs": 0.0, "ok": 0, "n": 0,
                "plan_calls": 0, "plan_secs": 0.0, "plan_out": 0, "first": [], "streamed": 0}

    totals = {m: zero() for m in modes}
    by_kind = {(m, k): zero() for m in modes for k in kinds}
    for task in tasks:
        for mode in modes:
            transcript = None
            if args.transcripts:
                os.makedirs(args.transcripts, exist_ok=True)
                transcript = os.path.join(args.transcripts, f"{task['id']}.{mode.replace('/', '+').replace(':', '-')}.txt")
            r = run(args.bin, args.model, task["question"], mode, args.timeout, config, latency_config, transcript)
            answer = r.get("answer", "")
            ok = "error" not in r and all(re.search(p, answer, re.IGNORECASE) for p in task["expect"])
            for t in (totals[mode], by_kind[(mode, task.get("kind", "-"))]):
                t["ok"] += ok
                t["n"] += 1
            if "error" in r and "llm_calls" not in r:
                emit(f"{task['id']:26} {mode:11} {'no':>3} {'-':>5} {'-':>7} {'-':>7} {'-':>5} {r['wall_s']:7.1f}  ERROR {r['error'][:80]}")
                continue
            for t in (totals[mode], by_kind[(mode, task.get("kind", "-"))]):
                if r.get("planning_ms", 0) > 0:
                    t["plan_calls"] += 1
                    t["plan_secs"] += r["planning_ms"] / 1000
                    t["plan_out"] += r.get("planning_output_tokens", 0)
                if r.get("first_tool_ms") is not None:
                    t["first"].append(r["first_tool_ms"] / 1000)
                t["streamed"] += r.get("streamed_plans", 0)
                t["calls"] += r["llm_calls"]
                t["in"] += r["input_tokens"]
                t["out"] += r["output_tokens"]
                t["secs"] += r["elapsed_ms"] / 1000
            shown = " ".join(answer.split())[:70] if "error" not in r else "ERROR " + r["error"][:64]
            emit(f"{task['id']:26} {mode:11} {'yes' if ok else 'no':>3} {r['llm_calls']:5} {r['input_tokens']:7} {r['output_tokens']:7} {r['plans']:5} {r.get('reused_results', 0):6} {r['elapsed_ms']/1000:7.1f}  {shown}")
    emit()
    emit(f"{'mode':11} {'success':>9} {'model calls':>11} {'input tokens':>12} {'output tokens':>13} {'seconds':>8}")
    for mode, t in totals.items():
        emit(f"{mode:11} {t['ok']:>4}/{len(tasks):<4} {t['calls']:>11} {t['in']:>12} {t['out']:>13} {t['secs']:>8.1f}")
    if len(kinds) > 1:
        emit()
        emit(f"{'kind':9} {'mode':11} {'success':>9} {'model calls':>11} {'input tokens':>12} {'output tokens':>13} {'seconds':>8}")
        for k in kinds:
            for mode in modes:
                t = by_kind[(mode, k)]
                emit(f"{k:9} {mode:11} {t['ok']:>4}/{t['n']:<4} {t['calls']:>11} {t['in']:>12} {t['out']:>13} {t['secs']:>8.1f}")
    for mode, t in totals.items():
        if t["plan_calls"]:
            emit()
            emit(f"{mode}: writing a plan took {t['plan_secs'] / t['plan_calls']:.1f} s on average "
                 f"({t['plan_out'] / t['plan_calls']:.0f} output tokens; interactions with a plan: {t['plan_calls']}; "
                 f"prompt reading included)")
    for mode, t in totals.items():
        if t["first"]:
            emit()
            emit(f"{mode}: the first tool started {sum(t['first']) / len(t['first']):.1f} s into the interaction on average "
                 f"({len(t['first'])} interactions with a tool; plans run while written: {t['streamed']}); "
                 f"interactions took {t['secs'] / max(t['n'], 1):.1f} s on average")
    n = totals.get("no-plan")
    for mode in modes:
        p = totals[mode]
        if mode == "no-plan" or not n or not p["calls"] or not p["in"]:
            continue
        emit()
        emit(f"no-plan ÷ {mode}: model calls {n['calls'] / p['calls']:.2f}×, input tokens {n['in'] / p['in']:.2f}× "
             f"({mode} saves {100 * (1 - p['in'] / n['in']):.0f}% of input tokens), wall time {n['secs'] / max(p['secs'], 1e-9):.2f}×, "
             f"success {p['ok']} vs {n['ok']} of {len(tasks)}")
        if p["ok"] and n["ok"]:
            emit(f"per correct answer: model calls {n['calls'] / n['ok']:.2f} (no-plan) vs {p['calls'] / p['ok']:.2f} ({mode}), "
                 f"input tokens {n['in'] / n['ok']:.0f} vs {p['in'] / p['ok']:.0f} "
                 f"({mode} saves {100 * (1 - (p['in'] / p['ok']) / (n['in'] / n['ok'])):.0f}%)")
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
