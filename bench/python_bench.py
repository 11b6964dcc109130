#!/usr/bin/env python3
"""What the Python package adds per step: the same plans of an instant tool run by toolplan's
engine with a Python tool (``toolplan.Engine``, a plain function) and by the Rust engine alone (the
``toolplan`` binary's ``run --json`` with its built-in ``echo`` tool), side by side.

Plans: N independent steps (``fanout``) and a chain of N steps, each reading the one before
(``chain``); N from --steps. Per step, for Python: the wall time of ``engine.run_sync`` (parsing
and validating the plan, the run, every call into Python and back, the report), and the run alone
(the report's ``elapsed``); for Rust, the run alone (the report's ``elapsed_ms``; the process start
and plan parsing left out, as the engine bench measures it). The difference of the two runs is what
a trivial Python tool adds per call (issue 24's target: under 20 µs).

Usage: python bench/python_bench.py [--steps 1000,10000] [--repeat 5] [--out FILE]
       (run with a python that has the package: pip install ./bindings/python)
"""
import argparse
import json
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def plan(shape, n):
    steps = []
    for i in range(n):
        text = f"$ref:s{i - 1}" if shape == "chain" and i else f"t{i}"
        steps.append({"id": f"s{i}", "tool": "echo", "arguments": {"text": text}})
    return {"steps": steps, "output_steps": [f"s{n - 1}"]}


def python_side(shape, n, repeat):
    import toolplan

    engine = toolplan.Engine(max_steps=max(n, 10_000))

    @engine.tool(read_only=True)
    def echo(text: str) -> str:
        return text

    text = json.dumps(plan(shape, n))
    walls, runs = [], []
    for i in range(repeat + 1):
        started = time.perf_counter()
        report = engine.run_sync(text)
        wall = time.perf_counter() - started
        if not report.ok:
            sys.exit(f"python {shape} {n}: {report.errors}")
        if i:
            walls.append(wall)
            runs.append(report.elapsed)
    return statistics.median(walls) / n * 1e6, statistics.median(runs) / n * 1e6


def rust_side(binary, shape, n, repeat):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(plan(shape, n), f)
        path = f.name
    try:
        per_step = []
        for i in range(repeat + 1):
            proc = subprocess.run([binary, "run", path, "--tools", "demo", "--json", "--quiet"],
                                  capture_output=True, text=True, timeout=300)
            if proc.returncode != 0:
                sys.exit(f"rust {shape} {n}: {proc.stderr.strip()}")
            report = json.loads(proc.stdout)
            if i:
                per_step.append(report["elapsed_ms"] * 1000.0 / n)
        return statistics.median(per_step)
    finally:
        os.unlink(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    target = os.environ.get("CARGO_TARGET_DIR", os.path.expanduser("~/.cache/toolplan/target"))
    ap.add_argument("--steps", default="1000,10000")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--binary", default=os.path.join(target, "release", "toolplan"),
                    help="the toolplan binary (built with cargo build --release -p toolplan-cli first)")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "python.txt"))
    args = ap.parse_args()
    if args.binary == os.path.join(target, "release", "toolplan"):
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "toolplan-cli"], cwd=ROOT, check=True,
                       env=dict(os.environ, CARGO_TARGET_DIR=target))
    import toolplan

    lines = [
        f"# python package {toolplan.__version__} (python {platform.python_version()}), "
        f"median of {args.repeat} runs after a warm-up, µs per step",
        f"# date: {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}",
        f"# command: {shlex.join(['python', os.path.relpath(os.path.abspath(__file__), ROOT)] + sys.argv[1:])}",
        f"{'plan':8} {'steps':>6} {'python wall':>12} {'python run':>11} {'rust run':>9} {'added':>8}",
    ]
    print("\n".join(lines), flush=True)
    for n in [int(x) for x in args.steps.split(",")]:
        for shape in ["fanout", "chain"]:
            wall, run = python_side(shape, n, args.repeat)
            rs = rust_side(args.binary, shape, n, args.repeat)
            line = f"{shape:8} {n:>6} {wall:>12.1f} {run:>11.1f} {rs:>9.2f} {run - rs:>8.1f}"
            print(line, flush=True)
            lines.append(line)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
