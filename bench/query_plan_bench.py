#!/usr/bin/env python3
"""Query-plan benchmark: the same LlamaIndex-style query plans run by LlamaIndex's QueryPlanTool and by toolplan.

Each plan in bench/query_plans/ (fanout3, fanout10, tree3, shared) is a LlamaIndex QueryPlan: a DAG of
query nodes with one root; leaves ask a tool (`source_1` .. `source_10`), branches combine the answers
of their dependencies with a response synthesizer. Every leaf tool sleeps --tool-ms (default 100) and
every LLM call of the synthesizer sleeps --synth-ms (default 200), so the wall time shows only how the
plan is scheduled:

* LlamaIndex: `llama_index.core.tools.query_plan.QueryPlanTool` with `FunctionTool`s and
  `get_response_synthesizer(response_mode="compact")` over a fixed-latency `CustomLLM`. It walks the
  plan depth-first, one node at a time, and runs a node shared by two branches once per branch.
  It runs in its own virtualenv (~/.cache/toolplan/venv-llamaindex, made and filled with
  llama-index-core by this script when missing): the script calls that venv's python on itself with
  --llamaindex-worker, which prints JSON.
* toolplan: an external command (--toolplan-cmd, default
  $CARGO_TARGET_DIR/release/examples/query_plan_bench, CARGO_TARGET_DIR defaulting to
  ~/.cache/toolplan/target) run as `CMD --plan FILE --tool-ms N --synth-ms N --repeat N`; it prints one
  JSON object `{"wall_ms": [...], "tool_calls": n, "llm_calls": m}`. When it is missing, only the
  LlamaIndex column is shown.

* toolplan inside LlamaIndex (the tp-in-li column): `toolplan.llamaindex.QueryPlanTool` from this
  checkout's Python package (bindings/python, installed into the same virtualenv by this script;
  --no-adapter skips it), built from the very same FunctionTools and synthesizer as LlamaIndex's:
  what a LlamaIndex user gets by changing one import.

Reported per plan: nodes, the critical path (longest path through the DAG, a leaf costing --tool-ms and
a branch --synth-ms, each node once), the serial time (every node in the order LlamaIndex runs it,
shared nodes once per use), the median wall time of each side over --repeat runs after one warm-up,
LlamaIndex / toolplan, toolplan's time over the critical path, and tool and LLM calls of each side.

Usage: python3 bench/query_plan_bench.py [--plans fanout3,tree3] [--tool-ms 100] [--synth-ms 200]
       [--repeat 5] [--toolplan-cmd PATH] [--out FILE] [--venv DIR]
"""
import argparse
import json
import os
import platform
import shlex
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PLANS_DIR = os.path.join(HERE, "query_plans")
DEFAULT_PLANS = "fanout3,fanout10,tree3,shared"
DEFAULT_VENV = os.path.expanduser("~/.cache/toolplan/venv-llamaindex")
PACKAGE = "llama-index-core"
TOOL_NAMES = [f"source_{i}" for i in range(1, 11)]


# ---------------------------------------------------------------------------
# plans


def plan_path(name):
    if os.sep in name or name.endswith(".json"):
        return os.path.abspath(name)
    return os.path.join(PLANS_DIR, name + ".json")


def load_plan(path):
    """Load a plan and check it is a QueryPlan as both sides expect it; return (plan, nodes by id, root id)."""
    with open(path) as f:
        plan = json.load(f)
    nodes = {}
    for n in plan["nodes"]:
        if n["id"] in nodes:
            raise ValueError(f"{path}: duplicate node id {n['id']}")
        nodes[n["id"]] = n
    used = set()
    for n in nodes.values():
        deps = n.get("dependencies") or []
        for d in deps:
            if d not in nodes:
                raise ValueError(f"{path}: node {n['id']} depends on unknown node {d}")
        used.update(deps)
        if deps and n.get("tool_name") is not None:
            raise ValueError(f"{path}: node {n['id']} has dependencies and a tool")
        if not deps and n.get("tool_name") not in TOOL_NAMES:
            raise ValueError(f"{path}: leaf {n['id']} names no tool of {TOOL_NAMES[0]}..{TOOL_NAMES[-1]}")
    roots = [i for i in nodes if i not in used]
    if len(roots) != 1:
        raise ValueError(f"{path}: {len(roots)} root nodes, want exactly one")
    # cycle check (a cycle would make LlamaIndex recurse forever)
    state = {}

    def visit(i):
        if state.get(i) == 1:
            raise ValueError(f"{path}: cycle through node {i}")
        if state.get(i) == 2:
            return
        state[i] = 1
        for d in nodes[i].get("dependencies") or []:
            visit(d)
        state[i] = 2

    visit(roots[0])
    return plan, nodes, roots[0]


def node_cost(node, tool_ms, synth_ms):
    return synth_ms if node.get("dependencies") else tool_ms


def critical_path_ms(nodes, root, tool_ms, synth_ms):
    """Longest path from a leaf to the root: the best any scheduler can do (shared nodes run once)."""
    memo = {}

    def finish(i):
        if i not in memo:
            deps = nodes[i].get("dependencies") or []
            memo[i] = max((finish(d) for d in deps), default=0) + node_cost(nodes[i], tool_ms, synth_ms)
        return memo[i]

    return finish(root)


def serial_ms(nodes, root, tool_ms, synth_ms):
    """Sum of node costs over the plan unfolded into a tree: what LlamaIndex's depth-first walk costs."""
    def walk(i):
        return node_cost(nodes[i], tool_ms, synth_ms) + sum(walk(d) for d in nodes[i].get("dependencies") or [])

    return walk(root)


# ---------------------------------------------------------------------------
# LlamaIndex worker (runs inside the venv)


def llamaindex_worker(args):
    """Run every plan with LlamaIndex's QueryPlanTool; print one JSON object on stdout."""
    import contextlib
    import importlib.metadata

    real_stdout = sys.stdout
    # QueryPlanTool prints every node it executes (print_text): keep stdout for the JSON.
    devnull = open(os.devnull, "w")
    with contextlib.redirect_stdout(devnull):
        result = _llamaindex_run(args)
    result["version"] = importlib.metadata.version(PACKAGE)
    result["python"] = platform.python_version()
    json.dump(result, real_stdout)
    real_stdout.write("\n")


def _llamaindex_run(args):
    # Block tiktoken: with no network its encodings cannot be downloaded, and nothing here should
    # need them; any code path that still tries to import it fails loudly instead of hanging.
    sys.modules["tiktoken"] = None
    from typing import Any

    from llama_index.core import Settings
    from llama_index.core.base.llms.types import CompletionResponse, CompletionResponseGen, LLMMetadata
    from llama_index.core.embeddings import MockEmbedding
    from llama_index.core.llms import CustomLLM
    from llama_index.core.llms.callbacks import llm_completion_callback
    from llama_index.core.response_synthesizers import get_response_synthesizer
    from llama_index.core.tools import FunctionTool
    from llama_index.core.tools.query_plan import QueryPlanTool

    # The tokenizer first: the synthesizer's PromptHelper counts tokens with it.
    Settings.tokenizer = lambda text: text.split()

    counts = {"llm": 0, "tools": {}}
    synth_s = args.synth_ms / 1000.0
    tool_s = args.tool_ms / 1000.0

    class FixedLatencyLLM(CustomLLM):
        """An LLM whose every completion takes synth-ms and says the same thing."""

        @property
        def metadata(self) -> LLMMetadata:
            return LLMMetadata(context_window=1_000_000, num_output=256, is_chat_model=False,
                               model_name="fixed-latency")

        @llm_completion_callback()
        def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponse:
            counts["llm"] += 1
            time.sleep(synth_s)
            return CompletionResponse(text="A short synthesized answer.")

        @llm_completion_callback()
        def stream_complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> CompletionResponseGen:
            counts["llm"] += 1
            time.sleep(synth_s)

            def gen() -> CompletionResponseGen:
                yield CompletionResponse(text="A short synthesized answer.", delta="A short synthesized answer.")

            return gen()

    llm = FixedLatencyLLM()
    Settings.llm = llm
    Settings.embed_model = MockEmbedding(embed_dim=8)

    def make_tool(name):
        def source(query: str) -> str:
            counts["tools"][name] = counts["tools"].get(name, 0) + 1
            time.sleep(tool_s)
            return f"answer of {name} to: {query}"

        return FunctionTool.from_defaults(fn=source, name=name,
                                          description=f"Answers questions from data source {name[len('source_'):]}.")

    tools = [make_tool(name) for name in TOOL_NAMES]
    synth = get_response_synthesizer(response_mode="compact", llm=llm)
    query_plan_tool = QueryPlanTool.from_defaults(query_engine_tools=tools, response_synthesizer=synth)

    def timed(tool, path):
        """Runs the plan in `path` with `tool`: one warm-up, then --repeat timed runs."""
        with open(path) as f:
            plan = json.load(f)
        walls, runs = [], []
        for i in range(args.repeat + 1):  # the first run is the warm-up
            counts["llm"] = 0
            counts["tools"] = {}
            started = time.perf_counter()
            response = tool(**plan)
            wall = (time.perf_counter() - started) * 1000.0
            if i:
                walls.append(wall)
                runs.append({"llm": counts["llm"], "tools": dict(counts["tools"])})
        if any(r != runs[0] for r in runs):
            raise RuntimeError(f"{path}: call counts differ between runs: {runs}")
        return {
            "wall_ms": walls,
            "tool_calls": sum(runs[0]["tools"].values()),
            "llm_calls": runs[0]["llm"],
            "per_tool": runs[0]["tools"],
            "answer": str(response),
        }

    out = {"plans": {path: timed(query_plan_tool, path) for path in args.plan_files}}
    # toolplan's adapter inside LlamaIndex: the same tools and synthesizer, one import changed.
    try:
        from toolplan.llamaindex import QueryPlanTool as ToolplanQueryPlanTool
    except ImportError:
        return out
    adapter = ToolplanQueryPlanTool.from_defaults(query_engine_tools=tools, response_synthesizer=synth)
    for path in args.plan_files:
        result = timed(adapter, path)
        result["same_answer"] = result["answer"] == out["plans"][path]["answer"]
        out["plans"][path]["adapter"] = result
    import toolplan
    out["toolplan_python"] = toolplan.__version__
    return out


# ---------------------------------------------------------------------------
# driver side (plain stdlib)


def venv_python(venv):
    return os.path.join(venv, "bin", "python")


def installed_version(python):
    proc = subprocess.run([python, "-c", f"import importlib.metadata as m; print(m.version({PACKAGE!r}))"],
                          capture_output=True, text=True)
    return proc.stdout.strip() if proc.returncode == 0 else None


def ensure_venv(venv):
    """Make the venv and install llama-index-core into it when missing; return its python."""
    python = venv_python(venv)
    pip_ok = os.path.exists(python) and subprocess.run(
        [python, "-m", "pip", "--version"], capture_output=True).returncode == 0
    if not pip_ok:
        print(f"# creating virtualenv {venv}", file=sys.stderr, flush=True)
        os.makedirs(os.path.dirname(venv), exist_ok=True)
        cmd = [sys.executable, "-m", "venv", "--clear", venv]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            # Debian and Ubuntu ship venv without ensurepip unless python3-venv is installed.
            detail = (proc.stderr or proc.stdout).strip().splitlines()
            print(f"# `{shlex.join(cmd)}` failed: {detail[-1] if detail else 'exit %d' % proc.returncode}",
                  file=sys.stderr)
            ver = "python3.%d-venv" % sys.version_info.minor
            if os.geteuid() == 0 and shutil.which("apt-get"):
                print(f"# installing python3-venv ({ver}) with apt-get", file=sys.stderr, flush=True)
                subprocess.run(["apt-get", "update"], check=False)
                if subprocess.run(["apt-get", "install", "-y", "python3-venv", ver]).returncode != 0:
                    subprocess.run(["apt-get", "install", "-y", "python3-venv"], check=False)
                proc = subprocess.run(cmd, capture_output=True, text=True)
            if proc.returncode != 0:
                sys.exit(f"error: cannot create a virtualenv with {sys.executable}: the venv module needs "
                         f"ensurepip; install it (as root: apt-get install -y python3-venv {ver}) and run again")
    if installed_version(python) is None:
        print(f"# installing {PACKAGE} into {venv}", file=sys.stderr, flush=True)
        proc = subprocess.run([python, "-m", "pip", "install", "--quiet", PACKAGE])
        if proc.returncode != 0 or installed_version(python) is None:
            sys.exit(f"error: pip could not install {PACKAGE} into {venv}")
    return python


def install_adapter(python):
    """Build and install this checkout's Python package (bindings/python) into the venv, so the
    worker also runs toolplan's QueryPlanTool inside LlamaIndex. False when that fails."""
    print("# installing bindings/python into the LlamaIndex virtualenv", file=sys.stderr, flush=True)
    proc = subprocess.run([python, "-m", "pip", "install", "--quiet", "--force-reinstall", "--no-deps",
                           os.path.join(ROOT, "bindings", "python")], cwd=ROOT)
    return proc.returncode == 0


def run_llamaindex(python, plan_files, args):
    cmd = [python, os.path.abspath(__file__), "--llamaindex-worker",
           "--tool-ms", str(args.tool_ms), "--synth-ms", str(args.synth_ms), "--repeat", str(args.repeat),
           "--plan-files", *plan_files]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        sys.exit(f"error: the LlamaIndex worker failed (exit {proc.returncode})")
    try:
        return json.loads(proc.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        sys.stderr.write(proc.stdout + proc.stderr)
        sys.exit("error: the LlamaIndex worker printed no JSON")


def run_toolplan(cmd, plan_file, args):
    argv = [cmd, "--plan", plan_file, "--tool-ms", str(args.tool_ms), "--synth-ms", str(args.synth_ms),
            "--repeat", str(args.repeat)]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {args.timeout}s"}
    if proc.returncode != 0:
        err = proc.stderr.strip().splitlines()
        return {"error": err[-1] if err else f"exit {proc.returncode}"}
    try:
        out = json.loads(proc.stdout)
        out["wall_ms"] = [float(x) for x in out["wall_ms"]]
        if not out["wall_ms"]:
            raise ValueError
    except (json.JSONDecodeError, KeyError, TypeError, ValueError):
        return {"error": "stdout was not one JSON object with wall_ms"}
    return out


def fmt_ms(x):
    return "-" if x is None else f"{x:.1f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    target = os.environ.get("CARGO_TARGET_DIR", os.path.expanduser("~/.cache/toolplan/target"))
    ap.add_argument("--plans", default=DEFAULT_PLANS,
                    help="comma-separated plan names in bench/query_plans/ (or paths to plan files)")
    ap.add_argument("--tool-ms", type=float, default=100, help="latency of every leaf tool call")
    ap.add_argument("--synth-ms", type=float, default=200, help="latency of every synthesizer LLM call")
    ap.add_argument("--repeat", type=int, default=5, help="timed runs per plan and side, after one warm-up")
    default_cmd = os.path.join(target, "release", "examples", "query_plan_bench")
    ap.add_argument("--toolplan-cmd", default=default_cmd,
                    help="toolplan's side; the default is built with cargo first")
    ap.add_argument("--venv", default=DEFAULT_VENV, help="virtualenv for llama-index-core")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "query_plan.txt"))
    ap.add_argument("--timeout", type=int, default=600, help="seconds per toolplan command")
    ap.add_argument("--no-adapter", action="store_true",
                    help="skip toolplan's Python adapter inside LlamaIndex (the tp-in-li column)")
    ap.add_argument("--llamaindex-worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--plan-files", nargs="*", default=[], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.repeat < 1:
        ap.error("--repeat must be at least 1")

    if args.llamaindex_worker:
        llamaindex_worker(args)
        return

    names = [p.strip() for p in args.plans.split(",") if p.strip()]
    plans = []
    for name in names:
        path = plan_path(name)
        if not os.path.exists(path):
            ap.error(f"no plan file {path}")
        try:
            _, nodes, root = load_plan(path)
        except (ValueError, KeyError, json.JSONDecodeError) as e:
            ap.error(str(e))
        plans.append({"name": os.path.splitext(os.path.basename(path))[0], "path": path, "nodes": nodes,
                      "critical": critical_path_ms(nodes, root, args.tool_ms, args.synth_ms),
                      "serial": serial_ms(nodes, root, args.tool_ms, args.synth_ms)})

    python = ensure_venv(args.venv)
    if not args.no_adapter and not install_adapter(python):
        print("# bindings/python did not install: no adapter column", file=sys.stderr)
    print(f"# running {len(plans)} plans with LlamaIndex ({args.repeat} runs + 1 warm-up each)",
          file=sys.stderr, flush=True)
    li = run_llamaindex(python, [p["path"] for p in plans], args)

    if args.toolplan_cmd == default_cmd:
        # Build (or bring up to date) toolplan's side, into the same target dir the default path uses.
        print("# building toolplan's side (cargo build --release --example query_plan_bench)",
              file=sys.stderr, flush=True)
        env = dict(os.environ, CARGO_TARGET_DIR=target)
        built = subprocess.run(["cargo", "build", "--release", "-p", "toolplan-query", "--example",
                                "query_plan_bench"], cwd=ROOT, env=env)
        if built.returncode != 0:
            print("# cargo build failed: LlamaIndex column only", file=sys.stderr)
    have_toolplan = os.path.isfile(args.toolplan_cmd) and os.access(args.toolplan_cmd, os.X_OK)
    if have_toolplan:
        for p in plans:
            print(f"# running {p['name']} with toolplan", file=sys.stderr, flush=True)
            p["tp"] = run_toolplan(args.toolplan_cmd, p["path"], args)

    lines = []

    def emit(line=""):
        print(line, flush=True)
        lines.append(line)

    try:
        ncpu = len(os.sched_getaffinity(0))
    except AttributeError:
        ncpu = os.cpu_count()
    emit(f"# query-plan benchmark: {len(plans)} plans, leaf tool {args.tool_ms:g} ms, "
         f"synthesizer {args.synth_ms:g} ms per LLM call, median of {args.repeat} runs after 1 warm-up")
    emit(f"# date: {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}")
    emit(f"# command: {shlex.join(['python3', os.path.relpath(os.path.abspath(__file__), ROOT)] + sys.argv[1:])}")
    emit(f"# llama-index-core: {li['version']} (python {li['python']}, {args.venv})")
    emit(f"# python: {platform.python_version()}; nproc: {ncpu}")
    if have_toolplan:
        emit(f"# toolplan: {args.toolplan_cmd}")
    else:
        emit(f"# toolplan: {args.toolplan_cmd} not found (not built yet?): LlamaIndex column only")
    emit("# critical = longest path, each node once; serial = every node one after another, shared nodes once per use")
    emit()
    if "toolplan_python" in li:
        emit(f"# tp-in-li: toolplan's QueryPlanTool (python package {li['toolplan_python']}) inside "
             "LlamaIndex, the same tools and synthesizer; tools li/tp/py counts all three")
    emit(f"{'plan':10} {'nodes':>5} {'critical':>8} {'serial':>7} {'llamaidx':>9} {'toolplan':>9} "
         f"{'tp-in-li':>9} {'li/tp':>6} {'li/py':>6} {'tp/crit':>8} {'tools li/tp/py':>14} {'llm li/tp/py':>12}")
    notes = []
    for p in plans:
        r = li["plans"][p["path"]]
        li_med = statistics.median(r["wall_ms"])
        tp = p.get("tp") or {}
        tp_med = statistics.median(tp["wall_ms"]) if "wall_ms" in tp else None
        ratio = f"{li_med / tp_med:.2f}" if tp_med else "-"
        over = f"{(tp_med / p['critical'] - 1) * 100:+.1f}%" if tp_med and p["critical"] else "-"
        py = r.get("adapter") or {}
        py_med = statistics.median(py["wall_ms"]) if "wall_ms" in py else None
        py_ratio = f"{li_med / py_med:.2f}" if py_med else "-"
        tools = f"{r['tool_calls']}/{tp.get('tool_calls', '-')}/{py.get('tool_calls', '-')}"
        llm = f"{r['llm_calls']}/{tp.get('llm_calls', '-')}/{py.get('llm_calls', '-')}"
        emit(f"{p['name']:10} {len(p['nodes']):>5} {p['critical']:>8.0f} {p['serial']:>7.0f} {fmt_ms(li_med):>9} "
             f"{fmt_ms(tp_med):>9} {fmt_ms(py_med):>9} {ratio:>6} {py_ratio:>6} {over:>8} {tools:>14} {llm:>12}")
        if py and not py.get("same_answer"):
            notes.append(f"# {p['name']}: the adapter's answer differs from LlamaIndex's")
        repeated = {k: v for k, v in sorted(r["per_tool"].items()) if v > 1}
        if repeated:
            notes.append(f"# {p['name']}: LlamaIndex called " +
                         ", ".join(f"{k} {v} times" for k, v in repeated.items()))
        if "error" in tp:
            notes.append(f"# {p['name']}: toolplan failed: {tp['error']}")
    if notes:
        emit()
        for n in notes:
            emit(n)

    if args.out:
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
        with open(args.out, "w") as f:
            f.write("\n".join(lines) + "\n")
        out = os.path.abspath(args.out)
        shown = os.path.relpath(out, ROOT) if out.startswith(ROOT + os.sep) else out
        print(f"# written to {shown}", file=sys.stderr)


if __name__ == "__main__":
    main()
