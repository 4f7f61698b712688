"""MCP servers' tools for agents: one server process per daemon, shared by the agents
that name it (see `hivemind.mcpspec` for the ROM's `mcp:` block).

`api` is the contract between this package and the rest: `McpPool` (in `pool`) holds
the servers, `McpTool`s are what an agent is offered, `McpResult` what a call gives
back, `ServerState` what `status` and `top` show. This package imports nothing from
hive/, agent/, daemon/, tools/, memory/, ltm/, llm/ or cli/.
"""
