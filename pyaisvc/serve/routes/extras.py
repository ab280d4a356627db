"""llama.cpp's server extras: health, Prometheus metrics, tokenize and detokenize."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse, PlainTextResponse
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from pyaisvc.serve import errors
from pyaisvc.serve.schemas import (
    SMALL_RESPONSES,
    DetokenizeRequest,
    DetokenizeResponse,
    Health,
    TokenizeRequest,
    TokenizeResponse,
)
from pyaisvc.serve.service import Service, get_service, unicode_text

router = APIRouter()
ServiceDep = Annotated[Service, Depends(get_service)]


@router.get("/health", response_model=Health, summary="200 while the guest serves, 503 while "
            "it is down or booting",
            responses={503: {"model": Health, "description": "the guest is down or booting"}})
async def health(service: ServiceDep) -> JSONResponse:
    """The guest's state: 200 while it is up, else 503 with why."""
    e = service.engine
    up = e.state == "up"
    body = Health(status="ok" if up else e.state, guest=e.state, qemu_pid=e.qemu_pid,
                  model=service.model, detail=None if up else e.why_down)
    reply = body.model_dump()
    if up:
        del reply["detail"]
    return JSONResponse(reply, status_code=200 if up else 503)


@router.get("/metrics", summary="Prometheus metrics", response_class=PlainTextResponse)
async def metrics(service: ServiceDep) -> PlainTextResponse:
    """The server's metrics in Prometheus' text format."""
    return PlainTextResponse(generate_latest(service.metrics.registry),
                             media_type=CONTENT_TYPE_LATEST)


@router.post("/tokenize", response_model=TokenizeResponse, responses=SMALL_RESPONSES,
             summary="text -> ids (llama.cpp)")
async def tokenize(req: TokenizeRequest, service: ServiceDep) -> dict[str, Any]:
    """The ids of req.content, each with its piece of text if asked."""
    ids = service.tok.encode(unicode_text(req.content, "content"))
    if not req.with_pieces:
        return {"tokens": ids}
    return {"tokens": [{"id": i, "piece": service.tok.decode([i])} for i in ids]}


@router.post("/detokenize", response_model=DetokenizeResponse, responses=SMALL_RESPONSES,
             summary="ids -> text (llama.cpp)")
async def detokenize(req: DetokenizeRequest, service: ServiceDep) -> dict[str, str]:
    """The text of req.tokens; 400 for an id not below the vocabulary."""
    bad = next((i for i in req.tokens if i >= service.limits.vocab), None)
    if bad is not None:
        raise errors.bad_field(f"tokens: id {bad} is not below the vocabulary size "
                               f"{service.limits.vocab}", "tokens")
    return {"content": service.tok.decode(req.tokens)}
