"""The daemon: one asyncio task per agent, woken by file events or its heartbeat."""
