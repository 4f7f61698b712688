"""A hostile MCP stdio server written by hand (raw JSON-RPC, stdlib only), for what the
SDK's own server would never send.

    hostile.py MODE [COUNT_FILE]

MODE: `many` offers 5000 tools; `badschema` one tool whose input schema is no valid
JSON Schema beside a good one; `longdesc` a 100 KB description; `churn` says its tool
list changed every 10 ms (COUNT_FILE gets a line per listing); `noisy` writes
escape sequences on stderr, then exits at its first call.
"""

import json
import sys
import threading
import time

MODE = sys.argv[1]
COUNT = sys.argv[2] if len(sys.argv) > 2 else None
_lock = threading.Lock()


def send(message: dict) -> None:
    with _lock:
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()


def tools() -> list[dict]:
    if MODE == "many":
        return [{"name": f"t{i:04d}", "description": "a tool", "inputSchema": {"type": "object"}}
                for i in range(5000)]
    if MODE == "badschema":
        return [{"name": "bad", "description": "x",
                 "inputSchema": {"type": "object", "properties": {"a": {"type": "strin"}}}},
                {"name": "good", "description": "y",
                 "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}}}]
    if MODE == "longdesc":
        return [{"name": "long", "description": "z" * 100_000, "inputSchema": {"type": "object"}}]
    return [{"name": "one", "description": "one", "inputSchema": {"type": "object"}}]


def churn() -> None:
    while True:
        time.sleep(0.01)
        send({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})


for line in sys.stdin:
    message = json.loads(line)
    mid, method = message.get("id"), message.get("method")
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": mid, "result": {
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {"listChanged": True}},
            "serverInfo": {"name": "hostile", "version": "1"}}})
    elif method == "notifications/initialized" and MODE == "churn":
        threading.Thread(target=churn, daemon=True).start()
    elif method == "tools/list":
        if COUNT:
            with open(COUNT, "a") as f:
                f.write("listed\n")
        send({"jsonrpc": "2.0", "id": mid, "result": {"tools": tools()}})
    elif method == "tools/call":
        if MODE == "noisy":
            sys.stderr.write("\x1b[2J\x1b]0;owned\x07 bye\u202e\n")
            sys.stderr.flush()
            sys.exit(3)
        send({"jsonrpc": "2.0", "id": mid, "result": {"content": [
            {"type": "text", "text": "ok"}]}})
    elif method == "ping":
        send({"jsonrpc": "2.0", "id": mid, "result": {}})
