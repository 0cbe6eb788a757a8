"""A stock MCP client (PyPI `mcp`, no Cordon code) driving Cordon's /mcp.

    python3 mcp_client.py <mcp url> <api key> <page url>

Lists the tools, opens a session, navigates to the page, snapshots, clicks
the "Sign in" button by its ref, closes the session, and prints one JSON
line with what it saw. Run by the integration test
`mcp::the_official_python_client_drives_a_session`.
"""

import asyncio
import json
import sys

from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


def structured(result):
    if result.is_error:
        raise SystemExit(f"tool error: {result.content[0].text}")
    return result.structured_content or json.loads(result.content[0].text)


def find_ref(nodes, role, name):
    for n in nodes:
        if n.get("role") == role and n.get("name") == name and "ref" in n:
            return n["ref"]
        found = find_ref(n.get("children", []), role, name)
        if found:
            return found
    return None


async def main(url, key, page):
    report = {}
    http = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
    async with http:
        async with streamable_http_client(url, http_client=http) as (read, write, *_):
            async with ClientSession(read, write) as session:
                await session.initialize()
                tools = await session.list_tools()
                report["tools"] = sorted(t.name for t in tools.tools)
                opened = structured(await session.call_tool("browser_open_session", {}))
                sid = opened["session_id"]
                report["session_id"] = sid
                nav = structured(
                    await session.call_tool("browser_navigate", {"session_id": sid, "url": page})
                )
                report["title"] = nav["title"]
                snap = structured(await session.call_tool("browser_snapshot", {"session_id": sid}))
                button = find_ref(snap["nodes"], "button", "Sign in")
                clicked = structured(
                    await session.call_tool("browser_click", {"session_id": sid, "ref": button})
                )
                report["clicked"] = clicked["success"]
                closed = structured(
                    await session.call_tool("browser_close_session", {"session_id": sid})
                )
                report["closed"] = closed["state"]
    print(json.dumps(report))


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
