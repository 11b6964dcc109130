#!/usr/bin/env python3
"""MCP benchmark: what one execute_tool_plan call saves over N sequential tool calls from an MCP
client, and what toolplan adds to each call it proxies.

The MCP server is the real @modelcontextprotocol/server-everything (stdio), the client the official
Python MCP SDK, both installed by `bash scripts/mcp-servers.sh`. For N = 1, 5, 20:

  * direct, sequential: the client calls the server's tool N times, one after another (what an
    agent that calls tools one round-trip at a time does);
  * toolplan, one plan: the client calls `toolplan mcp`'s execute_tool_plan once, with N
    independent steps calling the same tool (toolplan runs them at once on its own connection).

The tool is `trigger-long-running-operation` with duration D seconds (default 0.2: a tool that takes
time, like a search or an API call) and, to isolate overhead, `echo` (answers at once). The proxy
overhead is (N `echo` calls through `toolplan mcp --expose-tools` - N `echo` calls direct) / N.
Median of --repeat runs (default 5) after one warm-up.

    python3 bench/mcp_bench.py [--repeat 5] [--duration 0.2]

Writes the table to stdout; bench/results/mcp.txt keeps the last run (with the command).
"""
import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MCP_DIR = os.environ.get("TOOLPLAN_MCP_DIR", os.path.expanduser("~/.cache/toolplan/mcp-servers"))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.expanduser("~/.cache/toolplan/target"))


def relaunch_in_venv():
    venv = os.path.join(MCP_DIR, "venv")
    venv_python = os.path.join(venv, "bin", "python")
    # (The venv's python is a symlink to this one: tell them apart by sys.prefix.)
    if os.path.realpath(sys.prefix) != os.path.realpath(venv):
        if not os.path.exists(venv_python):
            subprocess.run(["bash", os.path.join(ROOT, "scripts", "mcp-servers.sh")], check=True)
        os.execv(venv_python, [venv_python] + sys.argv)


relaunch_in_venv()

from mcp import ClientSession, StdioServerParameters, stdio_client  # noqa: E402

EVERYTHING = os.path.join(MCP_DIR, "node_modules", ".bin", "mcp-server-everything")


async def timed(session, fn, repeat):
    await fn(session)  # warm-up
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        await fn(session)
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


def slow_args(duration):
    return {"duration": duration, "steps": 1}


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--duration", type=float, default=0.2)
    args = ap.parse_args()

    # No local model needed here: skip building llama.cpp.
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "toolplan-cli", "--no-default-features"], cwd=ROOT, check=True)
    toolplan = os.path.join(TARGET, "release", "toolplan")
    config = os.path.join(TARGET, "mcp-bench.toml")
    with open(config, "w") as f:
        f.write(f'[[mcp_servers]]\nname = "everything"\ncommand = {json.dumps(EVERYTHING)}\ntimeout = "60s"\n')

    direct = StdioServerParameters(command=EVERYTHING, args=[])
    proxied = StdioServerParameters(
        command=toolplan, args=["mcp", "--tools", "none", "--config", config, "--expose-tools"])
    rows = []
    async with stdio_client(direct) as (r1, w1), stdio_client(proxied) as (r2, w2):
        async with ClientSession(r1, w1) as d, ClientSession(r2, w2) as p:
            await d.initialize()
            await p.initialize()
            for n in (1, 5, 20):
                async def seq_slow(s, n=n):
                    for _ in range(n):
                        await s.call_tool("trigger-long-running-operation", slow_args(args.duration))

                async def plan_slow(s, n=n):
                    steps = [{"id": f"s{i}", "tool": "trigger-long-running-operation",
                              "arguments": slow_args(args.duration)} for i in range(n)]
                    r = await s.call_tool("execute_tool_plan", {"steps": steps})
                    assert r.structured_content["outcome"] == "completed", r

                async def seq_echo(s, n=n):
                    for i in range(n):
                        await s.call_tool("echo", {"message": f"m{i}"})

                async def plan_echo(s, n=n):
                    steps = [{"id": f"e{i}", "tool": "echo", "arguments": {"message": f"m{i}"}}
                             for i in range(n)]
                    await s.call_tool("execute_tool_plan", {"steps": steps})

                rows.append({
                    "n": n,
                    "seq_slow": await timed(d, seq_slow, args.repeat),
                    "plan_slow": await timed(p, plan_slow, args.repeat),
                    "seq_echo": await timed(d, seq_echo, args.repeat),
                    "proxy_echo": await timed(p, seq_echo, args.repeat),
                    "plan_echo": await timed(p, plan_echo, args.repeat),
                })

    out = []
    out.append(f"# date: {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}; commit "
               f"{subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], cwd=ROOT, capture_output=True, text=True).stdout.strip()}; "
               f"{os.cpu_count()} cores; command: python3 bench/mcp_bench.py --repeat {args.repeat} --duration {args.duration}")
    out.append(f"server-everything over stdio, Python MCP SDK client; tool 'trigger-long-running-operation' "
               f"({args.duration} s) and 'echo'; median of {args.repeat} runs, ms")
    out.append("")
    out.append(f"{'N':>3} | {'N sequential calls':>19} | {'1 execute_tool_plan':>19} | {'speed-up':>8} || "
               f"{'echo x N direct':>15} | {'echo x N via toolplan':>21} | {'overhead/call':>13} | {'echo plan':>9}")
    for r in rows:
        overhead = (r["proxy_echo"] - r["seq_echo"]) / r["n"]
        out.append(f"{r['n']:>3} | {r['seq_slow']:>19.1f} | {r['plan_slow']:>19.1f} | "
                   f"{r['seq_slow'] / r['plan_slow']:>7.2f}x || {r['seq_echo']:>15.2f} | "
                   f"{r['proxy_echo']:>21.2f} | {overhead:>13.3f} | {r['plan_echo']:>9.2f}")
    text = "\n".join(out)
    print(text)
    os.makedirs(os.path.join(ROOT, "bench", "results"), exist_ok=True)
    with open(os.path.join(ROOT, "bench", "results", "mcp.txt"), "w") as f:
        f.write(text + "\n")


asyncio.run(main())
