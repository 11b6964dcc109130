"""An MCP proxy over stdio that makes a tool fail on its first call, as a busy service does.

    python3 bench/flaky_proxy.py --fail-first TOOL [--fail-first TOOL ...] -- SERVER_COMMAND...

It starts SERVER_COMMAND (an MCP server on stdio), passes every message both ways, and answers the
first `tools/call` of each named TOOL itself with an error result ("503 Service Unavailable ...
try again") instead of passing it on; later calls pass. `execute_tool_plan` is left out of the
server's tool list, so that the client's own planner is the only one. For bench/agent_bench.py
--flaky: tasks whose first plan partly fails, to measure replans that reuse results.
"""
import json
import subprocess
import sys
import threading


def main():
    args = sys.argv[1:]
    if "--" not in args:
        sys.exit("usage: flaky_proxy.py --fail-first TOOL ... -- SERVER_COMMAND...")
    split = args.index("--")
    own, command = args[:split], args[split + 1:]
    failing = {own[i + 1] for i, a in enumerate(own[:-1]) if a == "--fail-first"}
    child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    lists = set()  # ids of tools/list requests, whose results are filtered
    lock = threading.Lock()

    def send(message):
        with lock:
            sys.stdout.write(json.dumps(message) + "\n")
            sys.stdout.flush()

    def from_server():
        for line in child.stdout:
            if not line.strip():
                continue
            message = json.loads(line)
            if message.get("id") in lists and "result" in message:
                lists.discard(message["id"])
                tools = message["result"].get("tools", [])
                message["result"]["tools"] = [t for t in tools if t.get("name") != "execute_tool_plan"]
            send(message)

    reader = threading.Thread(target=from_server, daemon=True)
    reader.start()
    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        method = message.get("method")
        if method == "tools/list":
            lists.add(message.get("id"))
        if method == "tools/call":
            name = (message.get("params") or {}).get("name")
            if name in failing:
                failing.discard(name)
                send({"jsonrpc": "2.0", "id": message.get("id"), "result": {
                    "content": [{"type": "text", "text": f"503 Service Unavailable: {name} is busy, "
                                 "try again"}],
                    "isError": True}})
                continue
        child.stdin.write(json.dumps(message) + "\n")
        child.stdin.flush()
    child.stdin.close()
    child.wait(timeout=10)


if __name__ == "__main__":
    main()
