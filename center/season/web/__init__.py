"""The season's read-only web page and JSON API (``sep_ladder run --http``): Starlette on uvicorn.

Reads SEASON_DIR (season.db opened read-only) through :mod:`center.season` and the report's replay
pages (:mod:`center.report`); only :mod:`center.commands` imports it, and only for ``--http``.
"""

from __future__ import annotations

from center.season.web.server import WebServer, serve_season

__all__ = ["WebServer", "serve_season"]
