#!/usr/bin/env python3
"""BFCL harness: toolplan on the Berkeley Function Calling Leaderboard, scored by BFCL's own checker.

For each entry of the categories simple (simple_python), multiple, parallel and parallel_multiple, the
entry's functions are converted to JSON Schema tools the way BFCL's OpenAI function-calling handler
does (`convert_to_tool`, dots in names become underscores), written to a file and given to
`toolplan ask QUESTION --dry-run --json --tool-defs FILE`: the model is asked once and nothing runs.
The calls it made are taken (each step of an `execute_tool_plan` plan as one call, and the direct
calls), decoded as BFCL's handler decodes function calls ({name: arguments}), and scored with
bfcl-eval's `ast_checker`, unchanged (model config `underscore_to_dot`, as for OpenAI models, so the
checker maps the names back).

Modes (the same model, greedy):
  plan-only  only execute_tool_plan is offered: the calls are the plan's steps    (--plan-only)
  plan-only:FORM  the same, the planner listing the tools as signatures, documented signatures
             or schemas                                        (--plan-only --plan-listing FORM)
  plan       the planner beside the tools (--plan-beside; toolplan ask's default with hosted models)
  no-plan    the tools only: the calls are the model's native tool calls         (--no-plan)
  default    toolplan ask's default for the model (the local model: plan-only with an answer
             field, --plan-only --answer-in-plan --results-answer; hosted: --plan-beside)

Reported per category x mode: accuracy, runs that ended in an error, repairs (a rejected plan sent
back once to be fixed) and rescues (repaired runs that scored), model calls, input/output tokens,
seconds (of the model calls; the model load is excluded). Per-entry results go to a JSON-lines file.
An entry's system turn, if any, goes to --instructions.

Held-out categories (--categories live_simple,live_multiple,live_parallel,live_parallel_multiple):
BFCL's user-contributed entries of the same four kinds, used only to check that what was improved on
the four is the method and not those questions.

The full four categories hold 1,000 entries; with the local 1.5B model on 2 cores an entry takes
15-40 s per mode, so the default is a deterministic sample: --sample N takes N entries per category,
evenly spaced over the file (entry round(i * len / N) for i < N). --sample 0 runs every entry.

Setup (once): bash bench/bfcl_setup.sh   (a virtualenv with bfcl-eval and the light packages its
checker imports; no model downloads). Run with that virtualenv's python:
  ~/.cache/toolplan/bfcl-venv/bin/python bench/bfcl_bench.py [--model local] [--sample 10]
      [--modes plan-only,plan,no-plan] [--categories simple,multiple,parallel,parallel_multiple]
      [--bin PATH] [--out bench/results/bfcl.txt]
"""
import argparse
import dataclasses
import importlib.resources
import json
import os
import subprocess
import sys
import tempfile
import time
import types

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

CATEGORIES = {
    "simple": "simple_python",
    "multiple": "multiple",
    "parallel": "parallel",
    "parallel_multiple": "parallel_multiple",
}
# Held out: user-contributed ("live") entries of the same four kinds, never used to tune toolplan.
HELD_OUT = {
    "live_simple": "live_simple",
    "live_multiple": "live_multiple",
    "live_parallel": "live_parallel",
    "live_parallel_multiple": "live_parallel_multiple",
}
MODE_FLAGS = {"plan-only": ["--plan-only"], "plan": ["--plan-beside"], "no-plan": ["--no-plan"], "default": []}
# plan-only with the planner listing the tools in another form (`--plan-listing`).
for _form in ("signatures", "documented", "schemas", "native"):
    MODE_FLAGS[f"plan-only:{_form}"] = ["--plan-only", "--plan-listing", _form]
MODEL_NAME = "toolplan"


def load_bfcl():
    """Imports bfcl-eval's checker and tool conversion without its heavy model registry: the
    checker reads only `underscore_to_dot` of the model's config, which is stubbed here (True, as
    for OpenAI's function-calling models, whose tool names cannot hold dots)."""

    @dataclasses.dataclass
    class ModelConfig:
        underscore_to_dot: bool = True

    stub = types.ModuleType("bfcl_eval.constants.model_config")
    stub.MODEL_CONFIG_MAPPING = {MODEL_NAME: ModelConfig()}
    sys.modules["bfcl_eval.constants.model_config"] = stub
    from bfcl_eval.constants.enums import Language, ModelStyle
    from bfcl_eval.constants.type_mappings import GORILLA_TO_OPENAPI
    from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker
    from bfcl_eval.model_handler.utils import convert_to_tool

    def to_tools(functions):
        # convert_to_tool changes its argument in place.
        return convert_to_tool(json.loads(json.dumps(functions)), GORILLA_TO_OPENAPI,
                               ModelStyle.OPENAI_COMPLETIONS)

    def check(functions, calls, ground_truth, category):
        return ast_checker(functions, calls, ground_truth, Language.PYTHON, category, MODEL_NAME)

    return to_tools, check


def read_jsonl(path):
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def sample(entries, n):
    if n <= 0 or n >= len(entries):
        return list(entries)
    return [entries[round(i * len(entries) / n)] for i in range(n)]


def question_of(entry):
    """The entry's question and system turn: the user messages of its single turn, and its system
    messages (few entries have one), which go to --instructions."""
    turn = entry["question"][0]
    user = "\n\n".join(m["content"] for m in turn if m.get("role") == "user")
    system = "\n\n".join(m["content"] for m in turn if m.get("role") == "system")
    return user, system


def calls_of(reply):
    """The calls a dry run made, as BFCL's function-calling handler decodes them: [{name: args}],
    each plan step one call, in the order written."""
    calls = []
    for call in reply.get("calls") or []:
        if call.get("name") == "execute_tool_plan":
            for step in (call.get("arguments") or {}).get("steps") or []:
                if isinstance(step, dict) and isinstance(step.get("tool"), str):
                    arguments = step.get("arguments")
                    calls.append({step["tool"]: arguments if isinstance(arguments, dict) else {}})
        else:
            arguments = call.get("arguments")
            calls.append({call["name"]: arguments if isinstance(arguments, dict) else {}})
    return calls


def ask(binary, model, question, tools_file, config, mode, timeout):
    user, system = question
    cmd = [binary, "ask", user, "--model", model, "--json", "--dry-run",
           "--tool-defs", tools_file, "--config", config] + MODE_FLAGS[mode]
    if system:
        cmd += ["--instructions", system]
    started = time.monotonic()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout}s", "wall_s": time.monotonic() - started}
    try:
        reply = json.loads(proc.stdout)
    except json.JSONDecodeError:
        last = proc.stderr.strip().splitlines()[-1:] or [f"exit {proc.returncode}"]
        reply = {"error": last[0]}
    if proc.returncode != 0 and "error" not in reply:
        reply["error"] = f"exit {proc.returncode}"
    reply["wall_s"] = time.monotonic() - started
    return reply


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bin", default=os.path.join(
        os.environ.get("CARGO_TARGET_DIR", os.path.expanduser("~/.cache/toolplan/target")),
        "release", "toolplan"))
    parser.add_argument("--model", default="local")
    parser.add_argument("--sample", type=int, default=10, help="entries per category (0: all)")
    parser.add_argument("--modes", default="plan-only,plan,no-plan")
    parser.add_argument("--categories", default=",".join(CATEGORIES),
                        help=f"of {', '.join(CATEGORIES)}; held out: {', '.join(HELD_OUT)}")
    parser.add_argument("--timeout", type=float, default=300)
    parser.add_argument("--ids", default="", help="only these entry ids (comma-separated), of the sample")
    parser.add_argument("--out", default=os.path.join(HERE, "results", "bfcl.txt"))
    args = parser.parse_args()
    modes = args.modes.split(",")
    categories = args.categories.split(",")
    for m in modes:
        if m not in MODE_FLAGS:
            parser.error(f"unknown mode {m} (known: {', '.join(MODE_FLAGS)})")
    for c in categories:
        if c not in CATEGORIES and c not in HELD_OUT:
            parser.error(f"unknown category {c} (known: {', '.join({**CATEGORIES, **HELD_OUT})})")

    to_tools, check = load_bfcl()
    data = importlib.resources.files("bfcl_eval") / "data"
    entries_path = os.path.splitext(args.out)[0] + "-entries.jsonl"
    rows = []
    with open(entries_path, "w") as log, tempfile.TemporaryDirectory() as tmp:
        # The model call's own timeout is the harness's: a slow machine scores the model, not the
        # default timeout of an interactive ask.
        config = os.path.join(tmp, "toolplan.toml")
        with open(config, "w") as f:
            f.write(f'[limits]\nmodel_timeout = "{int(args.timeout)}s"\n')
        for short in categories:
            name = {**CATEGORIES, **HELD_OUT}[short]
            entries = read_jsonl(data / f"BFCL_v4_{name}.json")
            answers = {a["id"]: a for a in read_jsonl(data / "possible_answer" / f"BFCL_v4_{name}.json")}
            ids = set(filter(None, args.ids.split(",")))
            for entry in sample(entries, args.sample):
                if ids and entry["id"] not in ids:
                    continue
                tools_file = os.path.join(tmp, "tools.json")
                with open(tools_file, "w") as f:
                    json.dump(to_tools(entry["function"]), f)
                for mode in modes:
                    reply = ask(args.bin, args.model, question_of(entry), tools_file, config, mode,
                                args.timeout + 30)
                    calls = calls_of(reply)
                    try:
                        verdict = check(entry["function"], calls, answers[entry["id"]]["ground_truth"], name)
                    except Exception as e:  # the checker's own failure on odd output is a miss
                        verdict = {"valid": False, "error": [f"checker: {e!r}"]}
                    row = {
                        "id": entry["id"], "category": short, "mode": mode,
                        "valid": bool(verdict.get("valid")),
                        "checker": None if verdict.get("valid") else verdict.get("error"),
                        "calls": calls, "error": reply.get("error"),
                        "plan_problems": reply.get("plan_problems"),
                        "llm_calls": reply.get("llm_calls", 0),
                        "repairs": reply.get("repairs", 0),
                        "repaired": reply.get("repaired", 0),
                        "unasked_steps": reply.get("unasked_steps", 0),
                        "filled_options": reply.get("filled_options", 0),
                        "dropped_steps": reply.get("dropped_steps", 0),
                        "input_tokens": reply.get("input_tokens", 0),
                        "output_tokens": reply.get("output_tokens", 0),
                        "secs": round(reply.get("model_ms", 0) / 1000, 2),
                        "wall_s": round(reply.get("wall_s", 0), 2),
                    }
                    rows.append(row)
                    log.write(json.dumps(row) + "\n")
                    log.flush()
                    print(f"{entry['id']:<28} {mode:<10} {'ok' if row['valid'] else 'no':<3} "
                          f"{row['input_tokens']:>6} {row['output_tokens']:>5} {row['secs']:>6.1f}s",
                          file=sys.stderr, flush=True)

    lines = [
        f"# BFCL v4 (bfcl-eval {bfcl_version()}), model {args.model}, "
        f"{'all entries' if args.sample <= 0 else f'sample of {args.sample} per category (evenly spaced)'}",
        f"# date: {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}",
        "# command: " + " ".join(["python", "bench/bfcl_bench.py"] + sys.argv[1:]),
        "",
        f"{'category':<22} {'mode':<21} {'accuracy':>9} {'entries':>7} {'errors':>6} {'repairs':>7} "
        f"{'rescued':>7} {'calls':>6} {'in tok':>8} {'out tok':>8} {'secs':>8}",
    ]
    for short in categories + ["all"]:
        for mode in modes:
            sel = [r for r in rows if r["mode"] == mode and (short == "all" or r["category"] == short)]
            if not sel:
                continue
            ok = sum(r["valid"] for r in sel)
            # A rescue: a run whose first plan was rejected, repaired into one that scored.
            rescued = sum(bool(r["repaired"]) and r["valid"] for r in sel)
            lines.append(
                f"{short:<22} {mode:<21} {100 * ok / len(sel):>8.1f}% {len(sel):>7} "
                f"{sum(bool(r['error']) for r in sel):>6} {sum(r['repairs'] for r in sel):>7} "
                f"{rescued:>7} "
                f"{sum(r['llm_calls'] for r in sel):>6} {sum(r['input_tokens'] for r in sel):>8} "
                f"{sum(r['output_tokens'] for r in sel):>8} {sum(r['secs'] for r in sel):>8.1f}")
    text = "\n".join(lines) + "\n"
    with open(args.out, "w") as f:
        f.write(text)
    print(text)


def bfcl_version():
    try:
        from importlib.metadata import version
        return version("bfcl-eval")
    except Exception:
        return "?"


if __name__ == "__main__":
    main()
