"""`burrow acp [--server URL]`: the ACP agent on stdin/stdout; the token is BURROW_TOKEN
(never a flag: a command line is visible to every user of the machine)."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys

DEFAULT_SERVER = "http://127.0.0.1:8420"


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "acp",
        help="speak the Agent Client Protocol on stdio (Zed, JetBrains), to a running server",
        description="An ACP agent over stdio for editors, a client of a running Burrow "
        "server. The API token is read from BURROW_TOKEN.",
    )
    p.add_argument(
        "--server",
        default=os.environ.get("BURROW_SERVER", DEFAULT_SERVER),
        help=f"the server's URL (BURROW_SERVER; default {DEFAULT_SERVER})",
    )
    p.set_defaults(handler=main)


def main(args: argparse.Namespace) -> int:
    return asyncio.run(_serve(args.server, os.environ.get("BURROW_TOKEN")))


async def _serve(server: str, token: str | None) -> int:
    from burrow.acp.agent import Agent
    from burrow.acp.protocol import Peer

    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    agent = Agent(server, token)
    agent.peer = Peer(reader, sys.stdout.buffer, agent.on_request, agent.on_notification)
    try:
        await agent.peer.serve()
    finally:
        await agent.close()
    return 0
