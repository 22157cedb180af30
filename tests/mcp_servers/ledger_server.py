"""A real MCP server over stdio whose tools write to a ledger file, and whose first call of
each tool is slow: it does its work at once, then takes ``$LEDGER_SLOW_S`` seconds to answer
(past a client's deadline, the call times out although its effect happened: the case a retry
must not repeat).

Tools, one per kind of annotation (MCP ``ToolAnnotations``):

* ``append_payment(amount)``: no annotations (MCP's defaults: may be destructive, not
  idempotent): appends a line to the ledger;
* ``set_payment(payment_id, amount)``: ``idempotentHint: true``: writes the payment under its id
  (a second call with the same arguments changes nothing);
* ``read_ledger()``: ``readOnlyHint: true``: returns the ledger.

Every call that reaches a tool is appended to ``$LEDGER_RUNS`` (one line: the tool's name), so
a test counts what ran; the ledger is ``$LEDGER``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

AMOUNT = {"type": "object", "properties": {"amount": {"type": "number"}}, "required": ["amount"]}
TOOLS = [
    types.Tool(name="append_payment", description="Append a payment to the ledger.", input_schema=AMOUNT),
    types.Tool(name="set_payment", description="Record a payment under its id (a repeat changes nothing).",
               input_schema={"type": "object", "properties": {"payment_id": {"type": "string"},
                                                              "amount": {"type": "number"}},
                             "required": ["payment_id", "amount"]},
               annotations=types.ToolAnnotations(idempotent_hint=True, destructive_hint=False)),
    types.Tool(name="read_ledger", description="Show the ledger.", input_schema={"type": "object", "properties": {}},
               annotations=types.ToolAnnotations(read_only_hint=True)),
]
_answered: set[str] = set()  # tools whose first (slow) call has been made


def _work(name: str, arguments: dict[str, Any]) -> str:
    ledger = Path(os.environ["LEDGER"])
    with open(os.environ["LEDGER_RUNS"], "a", encoding="utf-8") as runs:
        runs.write(name + "\n")
    if name == "append_payment":
        with ledger.open("a", encoding="utf-8") as out:
            out.write(f"{arguments['amount']}\n")
        return "appended"
    if name == "set_payment":
        book = json.loads(ledger.read_text(encoding="utf-8") or "{}") if ledger.exists() else {}
        book[str(arguments["payment_id"])] = arguments["amount"]
        ledger.write_text(json.dumps(book), encoding="utf-8")
        return "recorded"
    return ledger.read_text(encoding="utf-8") if ledger.exists() else ""


async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    text = _work(params.name, dict(params.arguments or {}))
    if params.name not in _answered:
        _answered.add(params.name)
        await anyio.sleep(float(os.environ.get("LEDGER_SLOW_S", "0")))
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


async def serve() -> None:
    server: Server[Any] = Server("ledger", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(serve)
