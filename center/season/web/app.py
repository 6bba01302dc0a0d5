"""The season's web app (Starlette): the pages and the JSON API over SEASON_DIR, read-only.

Routes are GET only (HEAD follows); each request opens season.db read-only and closes it. Every
response carries a Content-Security-Policy (the pages': :func:`~center.season.web.pages.page_policy`;
anything else: nothing may load), ``nosniff``, no referrer and no caching.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import TypeVar

import msgspec
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from center.evaluation.records import BattleRecord
from center.season.settings import SeasonSettings
from center.season.web.documents import (
    entry_document,
    queue_document,
    standings_document,
)
from center.season.web.pages import (
    entry_path,
    page_policy,
    render_page,
    render_season_replay,
    replay_policy,
)
from center.season.web.reader import ReadOnlyStore, log_names
from center.season.web.schema import API_DOCUMENTS, api_schema

__all__ = ["create_app"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: Headers of every response; a handler's own Content-Security-Policy replaces the first.
DEFAULT_HEADERS = {
    "content-security-policy": "default-src 'none'; frame-ancestors 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
    "cross-origin-resource-policy": "same-origin",
}
REPLAYS_KEPT = 32
"""Replay pages kept in memory (a recorded battle's page never changes)."""


class _Headers:
    """ASGI middleware: :data:`DEFAULT_HEADERS` on every response that does not set its own."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {k.decode("latin-1").lower() for k, _ in headers}
                headers += [
                    (k.encode(), v.encode()) for k, v in DEFAULT_HEADERS.items() if k not in present
                ]
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, with_headers)


class _Site:
    """The handlers, over one SEASON_DIR and its settings."""

    def __init__(self, season_dir: Path, settings: SeasonSettings) -> None:
        self.season_dir = Path(season_dir)
        self.settings = settings
        self._replays: dict[str, str] = {}
        self._lock = threading.Lock()

    def _read(self, build: Callable[[ReadOnlyStore], T]) -> T:
        try:
            with closing(ReadOnlyStore(self.season_dir)) as store:
                return build(store)
        except sqlite3.OperationalError as exc:
            logger.warning("season.db of %s not readable: %s", self.season_dir, exc)
            raise HTTPException(503, "the season's database cannot be read now") from None

    def _doc(self, path: str, request: Request) -> msgspec.Struct:
        s, d = self.settings, self.season_dir
        if path == "/api/standings":
            return self._read(lambda store: standings_document(store, s, d))
        if path == "/api/queue":
            return self._read(lambda store: queue_document(store, s, d))
        entry = request.path_params["entry"]
        doc = self._read(lambda store: entry_document(store, s, d, entry))
        if doc is None:
            raise HTTPException(404, f"no entry {entry!r} in the season")
        return doc

    # -- the API --------------------------------------------------------------------------------

    def api(self, path: str) -> Callable[[Request], Response]:
        def answer(request: Request) -> Response:
            return Response(
                msgspec.json.encode(self._doc(path, request)), media_type="application/json"
            )

        return answer

    def schema(self, request: Request) -> Response:
        return Response(msgspec.json.encode(api_schema()), media_type="application/json")

    # -- the pages ------------------------------------------------------------------------------

    def _page(self, html: str) -> HTMLResponse:
        return HTMLResponse(html, headers={"content-security-policy": page_policy()})

    def board(self, request: Request) -> Response:
        doc = self._doc("/api/standings", request)
        return self._page(render_page("board.html.j2", "/api/standings", doc, page="board"))

    def queue(self, request: Request) -> Response:
        doc = self._doc("/api/queue", request)
        return self._page(render_page("queue.html.j2", "/api/queue", doc, page="queue"))

    def entry(self, request: Request) -> Response:
        doc = self._doc("/api/entries/{entry}", request)
        api = "/api" + entry_path(request.path_params["entry"])
        return self._page(render_page("entry.html.j2", api, doc, page="entry"))

    def replay(self, request: Request) -> Response:
        battle_id = request.path_params["battle_id"]
        with self._lock:
            page = self._replays.get(battle_id)
        if page is None:
            row = self._read(
                lambda store: store.conn.execute(
                    "SELECT row FROM battles WHERE battle_id = ?", (battle_id,)
                ).fetchone()
            )
            if row is None:
                raise HTTPException(404, f"no recorded battle {battle_id!r} in the season")
            record = BattleRecord.from_row(msgspec.json.decode(row["row"]))
            names = log_names(self.season_dir / self.settings.candidates)
            page = render_season_replay(self.season_dir, record, names)
            with self._lock:
                if len(self._replays) >= REPLAYS_KEPT:
                    self._replays.pop(next(iter(self._replays)))
                self._replays[battle_id] = page
        return HTMLResponse(page, headers={"content-security-policy": replay_policy(page)})


def _error(request: Request, exc: Exception) -> Response:
    """An error in one line: ``{"error": ...}`` under /api/, plain text elsewhere."""
    if isinstance(exc, HTTPException):
        status, detail = exc.status_code, str(exc.detail)
    else:
        logger.exception("%s %s failed", request.method, request.url.path)
        status, detail = 500, "internal error (the ladder's log has it)"
    if request.url.path.startswith("/api/"):
        return JSONResponse({"error": detail}, status_code=status)
    return PlainTextResponse(detail, status_code=status)


def create_app(season_dir: str | Path, settings: SeasonSettings) -> ASGIApp:
    """The read-only app of SEASON_DIR: pages ``/``, ``/queue``, ``/entries/ID``,
    ``/battles/ID/replay``; the API (:data:`~center.season.web.schema.API_DOCUMENTS`) and its
    schema at ``/api/schema``."""
    site = _Site(Path(season_dir), settings)
    routes = [
        Route("/", site.board),
        Route("/queue", site.queue),
        Route("/entries/{entry}", site.entry),
        Route("/battles/{battle_id}/replay", site.replay),
        Route("/api/schema", site.schema),
        *(Route(path, site.api(path)) for path in API_DOCUMENTS),
    ]
    app = Starlette(routes=routes, exception_handlers={HTTPException: _error, Exception: _error})
    return _Headers(app)  # outside Starlette's own error handling: its 500s get them too
