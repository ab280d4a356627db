"""OpenAI's API: completions, chat completions (whole or streamed) and the model list."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request

from pyaisvc.serve.generation import generate
from pyaisvc.serve.schemas import (
    GENERATION_RESPONSES,
    ChatRequest,
    ChatResponse,
    CompletionRequest,
    CompletionResponse,
    ModelList,
)
from pyaisvc.serve.service import Service, get_service

router = APIRouter()
ServiceDep = Annotated[Service, Depends(get_service)]


@router.post("/v1/completions", response_model=CompletionResponse,
             responses=GENERATION_RESPONSES, summary="a completion of the prompt (text or "
             "ids); SSE chunks with stream: true")
async def completions(req: CompletionRequest, request: Request, service: ServiceDep) -> Any:
    """The completion of req.prompt, whole or streamed (pyaisvc.serve.generation)."""
    return await generate(service, req, request)


@router.post("/v1/chat/completions", response_model=ChatResponse,
             responses=GENERATION_RESPONSES, summary="the assistant's reply in the model's "
             "chat template; SSE chunks with stream: true")
async def chat_completions(req: ChatRequest, request: Request, service: ServiceDep) -> Any:
    """The assistant's reply to req.messages, whole or streamed."""
    return await generate(service, req, request)


@router.get("/v1/models", response_model=ModelList, summary="the one model served")
async def models(service: ServiceDep) -> dict[str, Any]:
    """The one model this server serves."""
    return {"object": "list", "data": [{"id": service.model, "object": "model",
                                        "created": 0, "owned_by": "aisvc"}]}
