"""``sep_edge --endpoint NAME=URL`` and ``--endpoint-header NAME=HEADER:VALUE``, read into
:class:`~edge.service.endpoints.forwarder.ModelEndpoint` s (ValueError with one clear line)."""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Iterable

from edge.contract.candidates import ENDPOINT_NAME
from edge.service.endpoints.forwarder import ModelEndpoint

__all__ = ["endpoint_headers_from_environment", "parse_endpoints"]


def parse_endpoints(specs: Iterable[str], header_specs: Iterable[str]) -> dict[str, ModelEndpoint]:
    """The endpoints named by ``--endpoint`` options, with their ``--endpoint-header`` s (or the
    API key of the environment)."""
    urls: dict[str, str] = {}
    for spec in specs:
        name, equals, url = spec.partition("=")
        name = name.strip().upper()
        if not equals or not ENDPOINT_NAME.fullmatch(name):
            raise ValueError(
                f"--endpoint {spec!r}: give NAME=URL, NAME of letters, digits and _ "
                "(e.g. --endpoint LLM=http://127.0.0.1:8000/v1)"
            )
        parts = urllib.parse.urlsplit(url.strip())
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(
                f"--endpoint {spec!r}: the URL must be http:// or https:// with a host"
            )
        if parts.query or parts.fragment or parts.username or parts.password:
            raise ValueError(
                f"--endpoint {spec!r}: the URL may have no query, fragment or credentials "
                "(give an API key with --endpoint-header)"
            )
        try:
            parts.port  # noqa: B018 (raises on a bad port)
        except ValueError as exc:
            raise ValueError(f"--endpoint {spec!r}: {exc}") from None
        if name in urls:
            raise ValueError(f"--endpoint {name} is given twice")
        urls[name] = url.strip()
    headers: dict[str, list[tuple[str, str]]] = {}
    for spec in header_specs:
        name, equals, header = spec.partition("=")
        field, colon, value = header.partition(":")
        name = name.strip().upper()
        if not equals or not colon or not field.strip() or any(c in spec for c in "\r\n"):
            raise ValueError(
                f"--endpoint-header {spec.splitlines()[0] if spec else spec!r}: give "
                "NAME=HEADER:VALUE (e.g. LLM=Authorization:Bearer sk-...)"
            )
        if name not in urls:
            raise ValueError(f"--endpoint-header for {name}: no --endpoint {name}=URL is given")
        headers.setdefault(name, []).append((field.strip(), value.strip()))
    return {
        name: ModelEndpoint(
            name,
            url,
            tuple(headers[name]) if name in headers else endpoint_headers_from_environment(name),
        )
        for name, url in urls.items()
    }


def endpoint_headers_from_environment(name: str) -> tuple[tuple[str, str], ...]:
    """``Authorization: Bearer $SEP_ENDPOINT_<NAME>_API_KEY`` when that variable is set. The
    variable is taken out of this process's environment, before the zygote starts, so
    that no worker inherits it (nor finds it in ``/proc/self/environ``)."""
    key = os.environ.pop(f"SEP_ENDPOINT_{name}_API_KEY", None)
    return (("Authorization", f"Bearer {key}"),) if key else ()
