"""How often the unasked-step check (toolplan_planner::unasked_steps) would send back a correct plan:
BFCL's ground truth for each entry, as a plan of one step per expected call, run through the check
with the entry's own functions and question. Every step it flags there is a false alarm.

    ~/.cache/toolplan/bfcl-venv/bin/python bench/bfcl_unasked.py [--categories simple,...]

Needs the virtualenv of bench/bfcl_setup.sh (for BFCL's data files) and builds the check's example
with cargo. No model is used.
"""
import argparse
import importlib.resources
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FILES = {"simple": "simple_python", "multiple": "multiple", "parallel": "parallel",
         "parallel_multiple": "parallel_multiple", "live_simple": "live_simple",
         "live_multiple": "live_multiple", "live_parallel": "live_parallel",
         "live_parallel_multiple": "live_parallel_multiple"}


def read_jsonl(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--categories", default=",".join(FILES))
    args = ap.parse_args()
    data = importlib.resources.files("bfcl_eval") / "data"
    lines, category_of = [], {}
    for short in args.categories.split(","):
        name = FILES[short]
        answers = {a["id"]: a for a in read_jsonl(data / "possible_answer" / f"BFCL_v4_{name}.json")}
        for entry in read_jsonl(data / f"BFCL_v4_{name}.json"):
            question = " ".join(m["content"] for m in entry["question"][0] if m["role"] == "user")
            tools = [{"name": f["name"], "description": f.get("description", ""),
                      "parameters": f.get("parameters", {})} for f in entry["function"]]
            steps = [{"id": f"s{i}", "tool": next(iter(call)), "arguments": {}}
                     for i, call in enumerate(answers[entry["id"]]["ground_truth"])]
            lines.append(json.dumps({"id": entry["id"], "question": question, "tools": tools,
                                     "plan": {"steps": steps}}))
            category_of[entry["id"]] = short
    run = subprocess.run(["cargo", "run", "--quiet", "--release", "-p", "toolplan-planner",
                          "--example", "unasked"], input="\n".join(lines) + "\n", text=True,
                         capture_output=True, cwd=os.path.dirname(HERE), check=True)
    counts = {}
    for line in run.stdout.splitlines():
        r = json.loads(line)
        c = counts.setdefault(category_of[r["id"]], [0, 0])
        c[0] += 1
        if r["unasked"]:
            c[1] += 1
            print(f"false alarm: {r['id']} {r['unasked']}", file=sys.stderr)
    print(f"{'category':24} {'plans':>6} {'sent back':>9}")
    for short, (n, flagged) in counts.items():
        print(f"{short:24} {n:>6} {flagged:>9}")
    print(f"{'all':24} {sum(c[0] for c in counts.values()):>6} {sum(c[1] for c in counts.values()):>9}")


if __name__ == "__main__":
    main()
