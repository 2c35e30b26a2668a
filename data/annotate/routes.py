"""HTTP routes of the annotation app: a thin layer over `AnnotationService` (on `app.state`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, Depends, Header, Request
from fastapi.responses import FileResponse

from proofcheck.data.annotate.auth import Authenticator
from proofcheck.data.annotate.models import (
    BrokenRequest,
    ConfigResponse,
    ItemResponse,
    QueueResponse,
    SaveRequest,
    SaveResponse,
)
from proofcheck.data.annotate.service import AnnotationService

STATIC_DIR = Path(__file__).resolve().parent / "static"

router = APIRouter()


def get_service(request: Request) -> AnnotationService:
    return request.app.state.service


def get_annotator(request: Request, x_annotator: Annotated[str | None, Header()] = None,
                  authorization: Annotated[str | None, Header()] = None) -> str:
    """The caller's annotator name (AuthError -> 401 when missing or, with tokens, wrong)."""
    auth: Authenticator = request.app.state.auth
    return auth.identify(x_annotator, authorization)


Service = Annotated[AnnotationService, Depends(get_service)]
Annotator = Annotated[str, Depends(get_annotator)]


@router.get("/", include_in_schema=False)
def index() -> FileResponse:
    """The single-page annotation tool."""
    return FileResponse(STATIC_DIR / "index.html", headers={"Cache-Control": "no-store"})


@router.get("/api/config", response_model=ConfigResponse)
def config(request: Request, service: Service) -> ConfigResponse:
    """What the page needs before login: whether tokens are required, the queue size."""
    return ConfigResponse(auth_required=request.app.state.auth.required, total=service.total,
                          input=str(service.input_path), out=str(service.out))


@router.get("/api/queue", response_model=QueueResponse)
def queue(service: Service, annotator: Annotator) -> QueueResponse:
    """The queue with this annotator's status per item and the index to resume at."""
    return service.queue(annotator)


@router.get("/api/items/{proof_id:path}", response_model=ItemResponse)
def item(proof_id: str, service: Service, annotator: Annotator) -> ItemResponse:
    """One proof to annotate, with this annotator's earlier work on it."""
    return service.item(annotator, proof_id)


@router.put("/api/annotations/{proof_id:path}", response_model=SaveResponse)
def save(proof_id: str, body: SaveRequest, service: Service, annotator: Annotator) -> SaveResponse:
    """Save (or replace) this annotator's annotation; 422 with the broken rule otherwise."""
    record = service.save(annotator, proof_id, body)
    return SaveResponse(record=record, progress=service.progress(annotator))


@router.put("/api/broken/{proof_id:path}", response_model=SaveResponse)
def broken(proof_id: str, body: BrokenRequest, service: Service, annotator: Annotator) -> SaveResponse:
    """Report the item itself as broken ("report error case")."""
    record = service.report_broken(annotator, proof_id, body)
    return SaveResponse(record=record, progress=service.progress(annotator))
