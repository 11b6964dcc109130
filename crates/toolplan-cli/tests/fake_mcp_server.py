"""A small MCP server over stdio (newline-delimited JSON-RPC, no SDK) for the hardening tests.

    python fake_mcp_server.py [--bad-schema] [--contradictory-schema]

Tools:
  env    -> the server's environment, as an object
  add    {a, b} -> a + b
  write  {path, text} -> writes text to path
  sleep  {seconds} -> waits, then "slept"
With --bad-schema it also lists `broken`, whose input schema is not a JSON Schema ({"type": 12}).
With --contradictory-schema it also lists `find_place` {has_laundry} -> its arguments, whose
boolean parameter lists strings as its values (as a BFCL tool does).
With --typed it also lists tools that declare an outputSchema (and readOnlyHint):
  lookup {name} -> structuredContent {name, city, team}
  liar   {}     -> structuredContent {city: 7}, though its schema says city is a string
With --text it also lists tools that answer text which is not JSON (read-only):
  pyuser {name} -> a Python dict: {'name': ..., 'city': 'London', 'active': True}
  table  {}     -> a markdown table of people and cities
"""
import json
import os
import sys
import time

NUMBER = {"type": "number"}
TOOLS = [
    {"name": "env", "description": "The server's environment.",
     "inputSchema": {"type": "object", "properties": {}}},
    {"name": "add", "description": "a + b.",
     "inputSchema": {"type": "object", "properties": {"a": NUMBER, "b": NUMBER},
                     "required": ["a", "b"]}},
    {"name": "write", "description": "Writes text to a file.",
     "inputSchema": {"type": "object",
                     "properties": {"path": {"type": "string"}, "text": {"type": "string"}},
                     "required": ["path", "text"]}},
    {"name": "sleep", "description": "Waits.",
     "inputSchema": {"type": "object", "properties": {"seconds": NUMBER}}},
]
if "--bad-schema" in sys.argv:
    TOOLS.append({"name": "broken", "description": "Its schema is not a schema.",
                  "inputSchema": {"type": 12}})
if "--contradictory-schema" in sys.argv:
    TOOLS.append({"name": "find_place", "description": "Finds a place to stay.",
                  "inputSchema": {"type": "object", "properties": {
                      "has_laundry": {"type": "boolean", "enum": ["True", "False", "dontcare"]}}}})

PERSON = {"type": "object", "properties": {"name": {"type": "string"}, "city": {"type": "string"},
                                           "team": {"type": "string"}},
          "required": ["name", "city", "team"]}
if "--typed" in sys.argv:
    TOOLS.append({"name": "lookup", "description": "A person.",
                  "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
                  "outputSchema": PERSON, "annotations": {"readOnlyHint": True}})
    TOOLS.append({"name": "liar", "description": "Breaks its own output schema.",
                  "inputSchema": {"type": "object", "properties": {}},
                  "outputSchema": {"type": "object", "properties": {"city": {"type": "string"}}}})
if "--text" in sys.argv:
    for name in ["pyuser", "table"]:
        TOOLS.append({"name": name, "description": "Text that is not JSON.",
                      "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
                      "annotations": {"readOnlyHint": True}})


def reply(id_, result):
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": id_, "result": result}) + "\n")
    sys.stdout.flush()


def text(value):
    return {"content": [{"type": "text", "text": json.dumps(value)}]}


def call(name, args):
    if name == "env":
        return {"content": [{"type": "text", "text": "env"}], "structuredContent": dict(os.environ)}
    if name == "add":
        return text(args["a"] + args["b"])
    if name == "write":
        with open(args["path"], "w") as f:
            f.write(args["text"])
        return text("written")
    if name == "sleep":
        time.sleep(float(args.get("seconds", 1)))
        return text("slept")
    if name == "find_place":
        return text(args)
    if name == "lookup":
        person = {"name": args.get("name", ""), "city": "Paris", "team": "design"}
        return {"content": [{"type": "text", "text": json.dumps(person)}], "structuredContent": person}
    if name == "pyuser":
        person = {"name": args.get("name", ""), "city": "London", "active": True}
        return {"content": [{"type": "text", "text": repr(person)}]}
    if name == "table":
        rows = "| name | city |\n|---|---|\n| Bob | London |"
        return {"content": [{"type": "text", "text": rows}]}
    if name == "liar":
        return {"content": [{"type": "text", "text": "{}"}], "structuredContent": {"city": 7}}
    return {"content": [{"type": "text", "text": f"no tool {name}"}], "isError": True}


for line in sys.stdin:
    if not line.strip():
        continue
    msg = json.loads(line)
    method, id_ = msg.get("method"), msg.get("id")
    if id_ is None:
        continue  # a notification
    if method == "initialize":
        reply(id_, {"protocolVersion": msg["params"]["protocolVersion"],
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "fake", "version": "1"}})
    elif method == "tools/list":
        reply(id_, {"tools": TOOLS})
    elif method == "tools/call":
        reply(id_, call(msg["params"]["name"], msg["params"].get("arguments") or {}))
    elif method == "ping":
        reply(id_, {})
    else:
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": id_,
                                     "error": {"code": -32601, "message": "no method"}}) + "\n")
        sys.stdout.flush()
