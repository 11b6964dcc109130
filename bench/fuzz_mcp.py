#!/usr/bin/env python3
"""Fuzzes `toolplan mcp`'s JSON-RPC input for a fixed time budget, over stdio and over streamable
HTTP on 127.0.0.1: random and mutated requests (unknown methods, wrong types, huge and deeply
nested params, garbage lines, random plans for execute_tool_plan and direct tool calls). After
every batch the server must still answer a `ping` within 10 s; a server that dies or stops answering
is a finding, saved with the batch that preceded it.

    python3 bench/fuzz_mcp.py [--seconds N] [--seed S] [--binary PATH] [--out DIR]

Standard library only. Prints messages sent per transport and the findings.
"""
import argparse
import json
import os
import random
import select
import subprocess
import sys
import time
import urllib.error
import urllib.request

METHODS = ["initialize", "ping", "tools/list", "tools/call", "resources/list", "prompts/list",
           "notifications/cancelled", "notifications/initialized", "logging/setLevel",
           "completion/complete", "nonexistent/method", "", None, 5]
TOOLS = ["execute_tool_plan", "echo", "calculator", "sleep", "concat", "get_weather", "nope"]


def rand_string(rng):
    return rng.choice([
        "", "x" * rng.randrange(0, 3000), "$ref:" + rng.choice("abcs") + ".temp",
        "\u0000\ud7ff\ufffd", "{\"steps\": []}", "1+" * rng.randrange(1, 100) + "1",
        "".join(chr(rng.randrange(32, 0x2fff)) for _ in range(rng.randrange(0, 30))),
    ])


def rand_value(rng, depth=0):
    kinds = ["null", "bool", "int", "float", "str"] + (["list", "dict", "deep"] if depth < 5 else [])
    k = rng.choice(kinds)
    if k == "null":
        return None
    if k == "bool":
        return rng.random() < 0.5
    if k == "int":
        return rng.choice([0, -1, 2**31, 2**63 - 1, -2**63, 10**30, rng.randrange(-1000, 1000)])
    if k == "float":
        return rng.choice([0.5, 1e308, -1e-308, rng.random()])
    if k == "str":
        return rand_string(rng)
    if k == "list":
        return [rand_value(rng, depth + 1) for _ in range(rng.randrange(0, 5))]
    if k == "deep":
        v = rand_string(rng)
        for _ in range(rng.choice([10, 100, 120])):
            v = [v]
        return v
    return {rand_string(rng)[:20]: rand_value(rng, depth + 1) for _ in range(rng.randrange(0, 5))}


def rand_plan(rng):
    steps = []
    for i in range(rng.randrange(0, 8)):
        args = {"text": rng.choice(["hi", "$ref:s%d" % rng.randrange(0, 8), rand_value(rng)]),
                "expression": rng.choice(["1+2", "$ref:s0 * 2", rand_string(rng)]),
                "ms": rng.choice([0, 5, 50, -1, "x"]), "a": "$ref:s0", "b": rand_value(rng),
                "location": rng.choice(["Tokyo", "$ref:s0.city", 5])}
        keys = rng.sample(list(args), rng.randrange(0, 3))
        step = {"id": rng.choice(["s%d" % i, "s0", "", "bad id", "s%d" % i]),
                "tool": rng.choice(TOOLS), "arguments": {k: args[k] for k in keys}}
        if rng.random() < 0.2:
            step["depends_on"] = ["s%d" % rng.randrange(0, 8)]
        if rng.random() < 0.1:
            step["arguments"] = json.dumps(step["arguments"])[: rng.randrange(0, 40)]
        steps.append(step)
    plan = {"steps": steps}
    if rng.random() < 0.3:
        plan["output_steps"] = ["s%d" % rng.randrange(0, 8)]
    if rng.random() < 0.1:
        plan[rand_string(rng)[:10]] = rand_value(rng)
    return plan


def rand_message(rng, next_id):
    r = rng.random()
    if r < 0.05:
        return rand_string(rng)  # not JSON at all
    if r < 0.10:
        return json.dumps(rand_value(rng))
    msg = {"jsonrpc": rng.choice(["2.0", "2.0", "2.0", "1.0", None])}
    if rng.random() < 0.9:
        msg["id"] = rng.choice([next_id, next_id, "s-%d" % next_id, None, [1], {"a": 1}])
    if rng.random() < 0.6:
        msg["method"] = "tools/call"
        name = rng.choice(TOOLS)
        arguments = rand_plan(rng) if name == "execute_tool_plan" else rand_value(rng)
        if rng.random() < 0.1:
            arguments = rand_value(rng)
        msg["params"] = {"name": name, "arguments": arguments}
        if rng.random() < 0.2:
            msg["params"]["_meta"] = {"progressToken": rand_value(rng)}
    else:
        msg["method"] = rng.choice(METHODS)
        if rng.random() < 0.7:
            msg["params"] = rand_value(rng)
    text = json.dumps(msg)
    if rng.random() < 0.05:
        cut = rng.randrange(0, len(text) + 1)
        text = text[:cut] + rand_string(rng)[:5] + text[cut:]
    return text.replace("\n", " ")


INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-03-26", "capabilities": {},
                   "clientInfo": {"name": "fuzz", "version": "1"}}}


class Stdio:
    def __init__(self, binary):
        self.proc = subprocess.Popen([binary, "mcp", "--tools", "demo", "--expose-tools",
                                      "--step-timeout", "2s", "--deadline", "5s"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env={"PATH": os.environ.get("PATH", "")})
        self.buf = b""
        self.send(json.dumps(INIT))
        assert self.wait_for(0, 30), "no answer to initialize"
        self.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))

    def send(self, line):
        self.proc.stdin.write(line.encode("utf-8", "replace") + b"\n")
        self.proc.stdin.flush()

    def wait_for(self, want_id, timeout):
        end = time.time() + timeout
        while time.time() < end:
            while b"\n" in self.buf:
                line, self.buf = self.buf.split(b"\n", 1)
                try:
                    if json.loads(line).get("id") == want_id:
                        return True
                except (ValueError, AttributeError):
                    pass
            r, _, _ = select.select([self.proc.stdout], [], [], 0.2)
            if r:
                chunk = os.read(self.proc.stdout.fileno(), 1 << 20)
                if not chunk:
                    return False
                self.buf += chunk
        return False

    def alive_after(self, ping_id):
        try:
            self.send(json.dumps({"jsonrpc": "2.0", "id": ping_id, "method": "ping"}))
        except (BrokenPipeError, OSError):
            return False
        return self.wait_for(ping_id, 10)

    def close(self):
        self.proc.kill()
        self.proc.wait()


class Http:
    def __init__(self, binary):
        self.proc = subprocess.Popen([binary, "mcp", "--tools", "demo", "--expose-tools", "--http", "0",
                                      "--step-timeout", "2s", "--deadline", "5s", "--max-sessions", "1000"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                     env={"PATH": os.environ.get("PATH", "")})
        line = self.proc.stderr.readline().decode()
        self.url = line.strip().rsplit(" ", 1)[-1]
        status, headers, _ = self.post(json.dumps(INIT), None)
        assert status == 200, status
        self.session = headers.get("mcp-session-id")
        self.post(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}), self.session)

    def post(self, body, session, timeout=15):
        req = urllib.request.Request(self.url, data=body.encode("utf-8", "replace"), method="POST")
        req.add_header("Content-Type", "application/json")
        req.add_header("Accept", "application/json, text/event-stream")
        if session:
            req.add_header("Mcp-Session-Id", session)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:
                return resp.status, {k.lower(): v for k, v in resp.headers.items()}, resp.read()
        except urllib.error.HTTPError as e:
            return e.code, {}, e.read()
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
            return None, {}, b""

    def send(self, line):
        # Most messages in the session; some without one, or with a made-up one.
        session = random.choice([self.session] * 8 + [None, "nope"])
        status, _, _ = self.post(line, session)
        return status

    def alive_after(self, ping_id):
        status, _, body = self.post(json.dumps({"jsonrpc": "2.0", "id": ping_id, "method": "ping"}),
                                    self.session, timeout=10)
        return status == 200 and str(ping_id).encode() in body

    def close(self):
        self.proc.kill()
        self.proc.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--binary", default=os.path.expanduser("~/.cache/toolplan/target/release/toolplan"))
    ap.add_argument("--out", default="fuzz-findings")
    a = ap.parse_args()
    rng = random.Random(a.seed)
    random.seed(a.seed)
    os.makedirs(a.out, exist_ok=True)
    totals = {}
    findings = 0
    for name, make in (("stdio", Stdio), ("http", Http)):
        server = make(a.binary)
        sent = statuses_5xx = 0
        end = time.time() + a.seconds / 2
        next_id = 1
        while time.time() < end:
            batch = []
            for _ in range(20):
                line = rand_message(rng, next_id)
                next_id += 1
                batch.append(line)
                status = server.send(line)
                if name == "http" and status is not None and status >= 500:
                    statuses_5xx += 1
                sent += 1
            next_id += 1
            if not server.alive_after(next_id):
                findings += 1
                path = os.path.join(a.out, "mcp-%s-%d.jsonl" % (name, findings))
                with open(path, "w") as f:
                    f.write("\n".join(batch) + "\n")
                print("finding: the %s server stopped answering; batch saved to %s" % (name, path))
                server.close()
                server = make(a.binary)
            next_id += 1
        alive = server.proc.poll() is None
        server.close()
        totals[name] = (sent, statuses_5xx, alive)
    for name, (sent, s5xx, alive) in totals.items():
        extra = ", %d answered 5xx" % s5xx if name == "http" else ""
        print("fuzz_mcp %s: %d messages (seed %d)%s; server alive at the end: %s"
              % (name, sent, a.seed, extra, "yes" if alive else "no"))
    print("fuzz_mcp findings: %d" % findings)
    sys.exit(1 if findings else 0)


if __name__ == "__main__":
    main()
