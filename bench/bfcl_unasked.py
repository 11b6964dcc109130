"""How often a check of a first plan against its question would send back a correct plan: BFCL's
ground truth for each entry, as a plan of one step per expected call, run through the check with the
entry's own functions and question. Every plan it flags there is a false alarm.

* `--check unasked` (the default): toolplan_planner::unasked_steps, steps the question does not ask
  for; the steps have no arguments.
* `--check options`: toolplan_planner::options_left_out, enum values the question names that no step
  sets; each step has the ground truth's arguments with every parameter it may leave out left out
  (the plans that give the check the most to flag). A plan sent back costs a model call; the last
  column counts those where the value the check asks for is not one the ground truth accepts.
* `--check dates`: toolplan_planner::dates_not_given, dates the steps write when the question names
  none; each step has every argument the ground truth gives a value.
* `--check contradicted`: toolplan_planner::options_contradicted, enum values a step sets while the
  question names another value of the same enum; each step has every argument the ground truth
  gives a value.
* `--check twins`: toolplan_planner::contradicted_twins, steps that are another step's twin but for
  an enum value the question contradicts (what the agent drops from a plan); each step has every
  argument the ground truth gives a value.
* `--check repeats`: toolplan_planner::repeats_with_additions, steps that repeat another step with
  additions the question does not give (what the agent drops from a plan); each plan is read twice,
  with every argument the ground truth gives a value and with every argument it may leave out left
  out, so the plans column counts two per entry.

    ~/.cache/toolplan/bfcl-venv/bin/python bench/bfcl_unasked.py [--check options] [--categories simple,...]

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


def every_argument(accepted):
    """A call's arguments from BFCL's accepted values with every parameter given its first accepted
    value that is not "" (left out where "" is all it accepts)."""
    arguments = {}
    for name, values in accepted.items():
        given = [v for v in values if v != ""] if isinstance(values, list) else []
        if given:
            arguments[name] = every_argument(given[0]) if isinstance(given[0], dict) else given[0]
    return arguments


def ground_truth_arguments(accepted):
    """A call's arguments from BFCL's accepted values ({param: [value, ...]}): a parameter that may
    be left out ("" accepted) is left out, any other takes its first accepted value (an object's
    accepted values are objects of accepted values)."""
    arguments = {}
    for name, values in accepted.items():
        if not isinstance(values, list) or not values or "" in values:
            continue
        value = values[0]
        arguments[name] = ground_truth_arguments(value) if isinstance(value, dict) else value
    return arguments


def accepts(ground_truth, option):
    """Whether the ground truth's call of the option's step accepts the value it names for its
    parameter (compared without case): a plan sent back and completed with it is still right."""
    index = int(option["step"][1:])
    accepted = next(iter(ground_truth[index].values()))
    for name in option["parameter"][:-1]:
        objects = [v for v in accepted.get(name, []) if isinstance(v, dict)]
        if not objects:
            return False
        accepted = objects[0]
    values = accepted.get(option["parameter"][-1], [])
    return any(isinstance(v, str) and v.lower() == option["value"].lower() for v in values)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--categories", default=",".join(FILES))
    ap.add_argument("--check", choices=["unasked", "options", "dates", "contradicted", "twins", "repeats"], default="unasked")
    args = ap.parse_args()
    data = importlib.resources.files("bfcl_eval") / "data"
    lines, category_of, accepted_of = [], {}, {}
    for short in args.categories.split(","):
        name = FILES[short]
        answers = {a["id"]: a for a in read_jsonl(data / "possible_answer" / f"BFCL_v4_{name}.json")}
        for entry in read_jsonl(data / f"BFCL_v4_{name}.json"):
            question = " ".join(m["content"] for m in entry["question"][0] if m["role"] == "user")
            tools = [{"name": f["name"], "description": f.get("description", ""),
                      "parameters": f.get("parameters", {})} for f in entry["function"]]
            readings = {"options": [ground_truth_arguments], "dates": [every_argument],
                        "contradicted": [every_argument], "twins": [every_argument],
                        "repeats": [every_argument, ground_truth_arguments]}
            for n, reading in enumerate(readings.get(args.check, [lambda _: {}])):
                steps = [{"id": f"s{i}", "tool": name, "arguments": reading(accepted)}
                         for i, call in enumerate(answers[entry["id"]]["ground_truth"])
                         for name, accepted in call.items()]
                plan_id = entry["id"] if n == 0 else f"{entry['id']} (optional left out)"
                lines.append(json.dumps({"id": plan_id, "question": question, "tools": tools,
                                         "plan": {"steps": steps}}))
                category_of[plan_id] = short
                accepted_of[plan_id] = answers[entry["id"]]["ground_truth"]
    run = subprocess.run(["cargo", "run", "--quiet", "--release", "-p", "toolplan-planner",
                          "--example", "checks", "--", args.check], input="\n".join(lines) + "\n", text=True,
                         capture_output=True, cwd=os.path.dirname(HERE), check=True)
    counts = {}
    for line in run.stdout.splitlines():
        r = json.loads(line)
        c = counts.setdefault(category_of[r["id"]], [0, 0, 0])
        c[0] += 1
        flagged = (r.get("unasked") or r.get("left_out") or r.get("made_up") or r.get("contradicted")
                   or r.get("repeats"))
        if flagged:
            c[1] += 1
            wrong = [o for o in r.get("left_out", []) if not accepts(accepted_of[r["id"]], o)]
            c[2] += bool(wrong)
            print(f"false alarm: {r['id']} {flagged}{' (a wrong value)' if wrong else ''}",
                  file=sys.stderr)
    wrong_column = f" {'to a wrong value':>16}" if args.check == "options" else ""
    print(f"{'category':24} {'plans':>6} {'sent back':>9}{wrong_column}")
    for short, (n, flagged, wrong) in counts.items():
        print(f"{short:24} {n:>6} {flagged:>9}" + (f" {wrong:>16}" if wrong_column else ""))
    total = [sum(c[i] for c in counts.values()) for i in range(3)]
    print(f"{'all':24} {total[0]:>6} {total[1]:>9}" + (f" {total[2]:>16}" if wrong_column else ""))


if __name__ == "__main__":
    main()
