"""Ports on loopback for the tests: a free one, a busy one, and uvicorn serving an
app on one in the test's own event loop."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Iterator
from typing import Any

import uvicorn


def free_port() -> int:
    """A loopback port nobody listens on (the kernel's choice of a free one, released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def busy_port() -> Iterator[int]:
    """A loopback port held by a listening socket while the block runs."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


async def uvicorn_on_free_port(app: Any, **config: Any) -> tuple[uvicorn.Server, asyncio.Task, int]:
    """app served by uvicorn on a free loopback port (config: more uvicorn.Config
    options), once it listens: (the server, its task, the port). The caller ends it
    with ``server.should_exit = True`` and awaits the task."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, lifespan="off",
                                           **config))
    task = asyncio.create_task(server.serve())
    while not server.started:
        assert not task.done(), "uvicorn stopped before it listened"
        await asyncio.sleep(0.02)
    return server, task, server.servers[0].sockets[0].getsockname()[1]
