"""The service's own routes: the kernel's table live, the limits, the burst, the page.

``/v1/aisvc/table`` is the kernel's request table now (pyaisvc.serve.live),
``/v1/aisvc/table/stream`` the same as Server-Sent Events, 5 a second, from
one poller shared by every client (at most ``Service.streams_max``: 429);
``/v1/aisvc/limits`` the limits one request meets (the page reads its max
tokens there); ``/`` the page and ``/web/NAME`` its files.
"""

from __future__ import annotations

import asyncio
import time
from importlib import resources
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, Response, StreamingResponse

from pyaisvc.serve import errors
from pyaisvc.serve.errors import ApiError
from pyaisvc.serve.gateway import GuestDown
from pyaisvc.serve.generation import hand_over, reply
from pyaisvc.serve.schemas import (
    DOWN_RESPONSES,
    MAX_BURST,
    BurstRequest,
    BurstResponse,
    CompletionRequest,
    ServiceLimits,
    TableSnapshot,
)
from pyaisvc.serve.service import Plan, Service, get_service

router = APIRouter()
ServiceDep = Annotated[Service, Depends(get_service)]
# The page's files (pyaisvc/serve/web/), each with its media type.
WEB_FILES = {"app.js": "text/javascript", "style.css": "text/css"}
BURST_ERRORS_SHOWN = 4


@router.get("/v1/aisvc/table", response_model=TableSnapshot, responses=DOWN_RESPONSES,
            summary="the kernel's request table now: the scheduling policy, every slot "
            "(state, owner pid, tenant, priority, progress, times), the FIFO, the batch, "
            "the ids served per tenant, the requests that ended last (an extension)")
async def table(service: ServiceDep) -> dict[str, Any]:
    """The table's snapshot; 503 while the guest is down or does not answer."""
    try:
        return await service.table_view.snapshot()
    except (GuestDown, TimeoutError) as e:
        raise errors.guest_down(e) from e


@router.get("/v1/aisvc/table/stream", include_in_schema=False)
async def table_stream(service: ServiceDep) -> StreamingResponse:
    """The table's snapshots as Server-Sent Events, until the client leaves; 429 while the
    stream has its most clients."""
    feed = service.table_feed
    q = feed.join()
    if q is None:
        raise errors.too_many_streams(feed.limit)

    async def events() -> Any:
        """The feed's snapshots as SSE events until the client goes; then it leaves."""
        try:
            while True:
                yield f"data: {await q.get()}\n\n".encode()
        finally:
            feed.leave(q)

    return StreamingResponse(events(), media_type="text/event-stream",
                             headers={"Cache-Control": "no-cache"})


@router.get("/v1/aisvc/limits", response_model=ServiceLimits,
            summary="the limits one request meets: the vocabulary, the model's seq_len, "
            "the kernel's prompt and predict limits (an extension)")
async def limits(service: ServiceDep) -> dict[str, int]:
    """The service's limits (pyaisvc.serve.service.Limits)."""
    lim = service.limits
    return {"vocab": lim.vocab, "seq_len": lim.seq_len, "max_prompt": lim.max_prompt,
            "max_predict": lim.max_predict, "max_burst": MAX_BURST}


# The page's burst control: n greedy completions submitted at once by the server
# itself, since a browser opens at most 6 connections to one server and would hold
# the rest back. Served with an API key (only its holders fire) or --enable-burst;
# at most the gateway's window, one burst at a time, the prompt tokenized once.
# Left out of the published schema: the API fuzzer would fire bursts.
@router.post("/v1/aisvc/burst", response_model=BurstResponse, include_in_schema=False)
async def burst(req: BurstRequest, request: Request, service: ServiceDep) -> dict[str, Any]:
    """req.n greedy completions of req.prompt at once; how many were done or failed; 403
    when the burst is off, 429 while another runs."""
    if not (service.burst or request.app.state.access.key):
        raise errors.burst_refused()
    if service.burst_lock.locked():
        raise errors.burst_busy()
    async with service.burst_lock:
        one = CompletionRequest(model=service.model, prompt=req.prompt,
                                max_tokens=req.max_tokens, temperature=0.0)
        plan = await asyncio.to_thread(service.plan, one)
        got = await asyncio.gather(*(_one(service, plan, request) for _ in range(req.n)),
                                   return_exceptions=True)
    failures = [g.message if isinstance(g, ApiError) else str(g) for g in got
                if isinstance(g, BaseException)]
    texts = [g["choices"][0]["text"] for g in got if isinstance(g, dict)]
    return {"n": req.n, "done": len(texts), "failed": len(failures),
            "errors": failures[:BURST_ERRORS_SHOWN], "texts": texts}


async def _one(service: Service, plan: Plan, request: Request) -> Any:
    """One completion of the burst's plan, whole."""
    return await reply(await hand_over(service, plan, time.monotonic()), service.model, request)


@router.get("/", include_in_schema=False)
async def page() -> HTMLResponse:
    """The page: the chat, the kernel's table live, the burst control."""
    return HTMLResponse(_web_file("index.html"))


@router.get("/web/{name}", include_in_schema=False)
async def web(name: str) -> Response:
    """One of the page's files; 404 for any other name."""
    if name not in WEB_FILES:
        raise errors.not_found(f"no file {name!r} here")
    return Response(_web_file(name), media_type=WEB_FILES[name],
                    headers={"Cache-Control": "no-cache"})


def _web_file(name: str) -> str:
    """One of the page's files, from the package."""
    return resources.files("pyaisvc.serve").joinpath("web", name).read_text(encoding="utf-8")
