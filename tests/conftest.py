"""Shared fixtures: the real local Pokémon Showdown server, started once per test session.

Request ``showdown`` (a started ``ShowdownServer``), ``showdown_config`` (its poke-env
``ServerConfiguration``) or ``sim_host`` (a started simulator host, the ``sim`` backend) by name.
With ``SEP_SHOWDOWN_URL`` set, the tests use the server running there instead of starting one.
Tests that use these fixtures get the ``showdown`` marker, so ``pytest -m "not showdown"`` runs
without node. The ``slow`` and ``serial`` marks come from :mod:`tests.marks`.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import pytest

from center.errors import ShowdownError
from center.showdown import ShowdownServer, find_install
from center.showdown.sim_host import SimHost
from tests import marks

if TYPE_CHECKING:
    from poke_env.ps_client.server_configuration import ServerConfiguration

SHOWDOWN_FIXTURES = frozenset({"showdown", "showdown_config", "showdown_install", "sim_host"})


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--serial",
        choices=marks.SERIAL_CHOICES,
        default="run",
        help="the serial tests: run them (alone, under pytest-xdist), skip them, or run only them",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test that needs the real Showdown with ``showdown``, and the slow and serial
    ones with ``slow`` and ``serial`` (:mod:`tests.marks`); keep the ones ``--serial`` asks for."""
    for item in items:
        if SHOWDOWN_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.showdown)
    marks.apply(items)
    marks.select(config, items)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """Under pytest-xdist, a ``serial`` test runs while no other test of the run does."""
    with marks.turn(item):
        yield


def _fail(exc: ShowdownError) -> NoReturn:
    pytest.fail(f"Pokémon Showdown unavailable: {exc}", pytrace=False)


@pytest.fixture(scope="session")
def showdown_install() -> Path:
    """The pinned Showdown package folder (fails with the fix when it is not installed)."""
    try:
        return find_install()
    except ShowdownError as exc:
        _fail(exc)


@pytest.fixture(scope="session")
def showdown() -> Iterator[ShowdownServer]:
    """A running Showdown server for the whole session: ``$SEP_SHOWDOWN_URL`` when set
    (never stopped by the tests), else our own on a free port, stopped at the end."""
    url = os.environ.get("SEP_SHOWDOWN_URL")
    try:
        server = ShowdownServer.attach(url) if url else ShowdownServer().start()
    except ShowdownError as exc:
        _fail(exc)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def showdown_config(showdown: ShowdownServer) -> ServerConfiguration:
    """The session server as a poke-env ``ServerConfiguration``."""
    return showdown.server_configuration()


@pytest.fixture(scope="session")
def sim_host() -> Iterator[SimHost]:
    """A running simulator host (Showdown's own simulator in node) for the whole session."""
    try:
        host = SimHost().start()
    except ShowdownError as exc:
        _fail(exc)
    try:
        yield host
    finally:
        host.stop()
