"""unstuck inside the agent frameworks people already use (DESIGN.md, "Layers": integrations).
Internal: not a supported import path (docs/reference/index.md lists those that are).

Each adapter drives the public :class:`unstuck.Guard` through its framework's own mechanism,
and none re-implements policy:

* :mod:`unstuck.integrations.openai_agents`: the OpenAI Agents SDK (``unstuck[openai-agents]``);
* :mod:`unstuck.integrations.langgraph`: LangChain agents and LangGraph graphs (``unstuck[langgraph]``);
* :mod:`unstuck.integrations.pydantic_ai`: Pydantic AI (``unstuck[pydantic-ai]``);
* :mod:`unstuck.integrations.mcp`: any MCP server, from the client side, and the ``unstuck
  mcp-proxy`` stdio proxy (``unstuck[mcp]``).

What they share is :mod:`unstuck.integrations.common`: a framework tool described to the
guard (:func:`~unstuck.integrations.common.spec_for`), the blocked status raised to the host
application (:class:`~unstuck.integrations.common.Blocked`), and the user's answer read from
what a framework resumes with (:func:`~unstuck.integrations.common.read_answer`). Importing
this package imports no framework.
"""
