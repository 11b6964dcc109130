"""Drives `toolplan mcp` with the official Python MCP SDK, as an MCP client would: lists the tools,
calls execute_tool_plan with a plan over the demo tools (collecting progress notifications), calls a
tool directly, and prints one JSON object with what it saw.

    python mcp_client.py stdio TOOLPLAN_BINARY [toolplan mcp args...]
    python mcp_client.py http URL [TOKEN]
    python mcp_client.py cancel PLAN_JSON TOOLPLAN_BINARY [toolplan mcp args...]

`cancel` calls execute_tool_plan with PLAN_JSON, gives up on it after 0.5 s (the SDK then sends
notifications/cancelled), waits 3 s, and reports how long the call ran, what progress it saw, and
that the server still answers a quick plan afterwards.
"""
import asyncio
import time

import anyio
import json
import sys

from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

PLAN = {
    "steps": [
        {"id": "tokyo", "tool": "get_weather", "arguments": {"location": "Tokyo"}},
        {"id": "london", "tool": "get_weather", "arguments": {"location": "London"}},
        {"id": "diff", "tool": "calculator",
         "arguments": {"expression": "$ref:tokyo.temp - $ref:london.temp"}},
    ],
    "output_steps": ["diff"],
}


async def session_checks(session):
    await session.initialize()
    tools = (await session.list_tools()).tools
    progress = []

    async def on_progress(done, total, message):
        progress.append({"done": done, "total": total, "message": message})

    result = await session.call_tool("execute_tool_plan", PLAN, progress_callback=on_progress)
    invalid = await session.call_tool(
        "execute_tool_plan", {"steps": [{"id": "a", "tool": "no_such_tool"}]})
    direct = None
    if any(t.name == "echo" for t in tools):
        r = await session.call_tool("echo", {"text": "hi"})
        direct = {"text": r.content[0].text, "is_error": r.is_error}
    await asyncio.sleep(0.2)  # progress notifications may trail the result
    return {
        "tools": [t.name for t in tools],
        "planner_schema": next(t.input_schema for t in tools if t.name == "execute_tool_plan"),
        "text": result.content[0].text,
        "structured": result.structured_content,
        "is_error": result.is_error,
        "progress": progress,
        "invalid": {"text": invalid.content[0].text, "is_error": invalid.is_error},
        "direct": direct,
    }


async def cancel_checks(session, plan):
    await session.initialize()
    progress = []

    async def on_progress(done, total, message):
        progress.append(message)

    started = time.monotonic()
    with anyio.move_on_after(0.5) as scope:
        await session.call_tool("execute_tool_plan", plan, progress_callback=on_progress)
    abandoned_after = time.monotonic() - started
    await asyncio.sleep(3)
    after = await session.call_tool(
        "execute_tool_plan",
        {"steps": [{"id": "n", "tool": "calculator", "arguments": {"expression": "1 + 1"}}]})
    return {
        "cancelled": scope.cancelled_caught,
        "abandoned_after_s": abandoned_after,
        "progress": progress,
        "after": after.structured_content,
    }


async def main():
    mode = sys.argv[1]
    if mode == "cancel":
        params = StdioServerParameters(command=sys.argv[3], args=sys.argv[4:])
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                out = await cancel_checks(session, json.loads(sys.argv[2]))
    elif mode == "stdio":
        params = StdioServerParameters(command=sys.argv[2], args=sys.argv[3:])
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as session:
                out = await session_checks(session)
    else:
        headers = {"Authorization": f"Bearer {sys.argv[3]}"} if len(sys.argv) > 3 else None
        async with create_mcp_http_client(headers=headers) as http:
            async with streamable_http_client(sys.argv[2], http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    out = await session_checks(session)
    print(json.dumps(out))


asyncio.run(main())
