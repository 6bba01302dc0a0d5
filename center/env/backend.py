"""Where an environment's battles run: the declared table of backends (:data:`BACKENDS`).

``"server"`` plays on the local Showdown server through poke-env players (its seats keep their
poke-env Battles); ``"sim"`` in Showdown's own simulator, seeded (a seat keeps a Battle only where an
Agent here reads one). Both behind :class:`~center.env.session_api.BattleBackend`; everything that
differs is a field of a :class:`BackendSpec` (:func:`backend_spec`), and no other module compares a
backend's name. A new backend is a row of :data:`BACKENDS` (docs/development.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from poke_env.ps_client.server_configuration import (
    LocalhostServerConfiguration,
    ServerConfiguration,
)

from center.env.session_api import BattleBackend
from center.errors import EnvError

if TYPE_CHECKING:
    from poke_env.player import Player

    from center.showdown.sim_replay import InputLog, Resimulated
    from center.showdown.sim_seeds import RunSecret

__all__ = [
    "BACKENDS",
    "DEFAULT_RUN_BACKEND",
    "BackendSpec",
    "BattleReplay",
    "SessionRequest",
    "backend_spec",
    "resolve_server",
    "resolve_simulator",
    "server_url_backend",
]


@dataclass(frozen=True)
class SessionRequest:
    """What a PokemonEnv asks of a backend's session: its seats, format, teams and names, and what
    it plays on (``server``: the environment's ``server`` argument, None to start one)."""

    players: Sequence[str]
    battle_format: str
    server: Any
    teams: dict[str, str | None] | None
    username_prefix: str
    secret: RunSecret
    #: the outside poke-env Player for the backend's server configuration (None: two seats)
    opponent: Callable[[ServerConfiguration], Player | None]
    #: both sides' team sheets shown at team preview (the simulator only)
    open_team_sheets: bool = False


#: a session for the request, and what the call started for it (to ``stop()`` with the env), or None
SessionFactory = Callable[[SessionRequest], tuple[BattleBackend, Any]]


@dataclass(frozen=True)
class BattleReplay:
    """How a backend plays one of its recorded battles again (``sep_replay``): from a file kept
    beside the battle's protocol log, with no agents and no edges."""

    #: what it plays the battle again from, in messages
    source: str
    #: that file: the protocol log's (``logs/ID.log``) with this suffix (``logs/ID.input.log``)
    suffix: str
    #: start what replays battles (for the caller to ``stop()``)
    start: Callable[[], Any]
    #: the file's lines for the battle room ``tag``, parsed; ValueError for a line it never writes
    parse: Callable[[list[str], str], InputLog]
    #: play the parsed battle on what ``start`` returned: every frame each player is sent, its end
    run: Callable[[Any, InputLog], Resimulated]


@dataclass(frozen=True)
class BackendSpec:
    """One backend: everything the center asks of it besides its session's interface."""

    name: str
    #: what the backend is, after its name on the report's ``backend`` line
    description: str
    #: every battle is seeded from its per-battle seed: the same seed and actions, the same battle
    seeded: bool
    #: an outside poke-env ``Player`` may play one side (PokemonEnv's ``opponent``)
    outside_player: bool
    #: its players' names are part of the (reproducible) battle: every worker uses the same ones;
    #: otherwise each worker's names need a prefix of their own (one login each on one server)
    shared_usernames: bool
    #: it plays on a Showdown server that ``--server`` (a URL) may name
    takes_server_url: bool
    #: start what a run plays on (for the caller to ``stop()``), given ``--server``'s URL or None
    start: Callable[[str | None], Any]
    #: make a PokemonEnv's session
    session: SessionFactory
    #: how ``sep_replay`` plays a recorded battle again; None: it cannot
    replay: BattleReplay | None

    @property
    def label(self) -> str:
        """The report's one line: ``name: description``."""
        return f"{self.name}: {self.description}"

    def username_prefix(self, base: str, worker: str) -> str:
        """The username prefix of one worker's environment (``worker`` names it within the run)."""
        return base if self.shared_usernames else f"{base}{worker}"


# -- the server -----------------------------------------------------------------------------------


def resolve_server(server: Any) -> tuple[ServerConfiguration, Any]:
    """Turn ``server`` (None, a ShowdownServer, a ServerConfiguration or a URL) into a configuration.

    Returns the configuration and, when this call started a server, that server (to stop later).
    """
    if isinstance(server, ServerConfiguration):
        return server, None
    if isinstance(server, str):
        url = server.rstrip("/")
        if url.startswith("http"):
            url = "ws" + url[4:]
        if not url.endswith("/showdown/websocket"):
            url += "/showdown/websocket"
        return ServerConfiguration(url, LocalhostServerConfiguration.authentication_url), None
    from center.showdown import ShowdownServer

    if server is None:
        started = ShowdownServer.find_or_start()
        return started.server_configuration(), started
    if isinstance(server, ShowdownServer):
        return server.server_configuration(), None
    raise EnvError(f"unsupported server argument {server!r}")


def _start_server(server_url: str | None) -> Any:
    from center.showdown import ShowdownServer

    return ShowdownServer.find_or_start(server_url)


def _server_session(request: SessionRequest) -> tuple[BattleBackend, Any]:
    from center.env.battle_session import BattleSession

    if request.open_team_sheets:
        raise EnvError("open team sheets are shown on the simulator only (backend='sim')")
    config, started = resolve_server(request.server)
    try:
        session = BattleSession(
            request.players,
            opponent=request.opponent(config),
            battle_format=request.battle_format,
            server_configuration=config,
            teams=request.teams,
            username_prefix=request.username_prefix,
        )
    except BaseException:
        if started is not None:
            started.stop()
        raise
    return session, started


# -- the simulator --------------------------------------------------------------------------------


def resolve_simulator(server: Any) -> tuple[Any, Any]:
    """Turn ``server`` (None or a SimHost) into the simulator host to play on.

    Returns the host and, when this call started it, that host again (to stop later).
    """
    from center.showdown.sim_host import SimHost

    if server is None:
        started = SimHost().start()
        return started, started
    if isinstance(server, SimHost):
        return server, None
    raise EnvError(
        f'backend="sim" plays on a SimHost (or starts its own), not on {server!r}; '
        'use backend="server" for a Showdown server'
    )


def _start_simulator(server_url: str | None) -> Any:
    from center.showdown.sim_host import SimHost

    return SimHost().start()


def _sim_session(request: SessionRequest) -> tuple[BattleBackend, Any]:
    from center.env.sim_session import SimSession

    host, started = resolve_simulator(request.server)
    try:
        session = SimSession(
            request.players,
            battle_format=request.battle_format,
            host=host,
            teams=request.teams,
            username_prefix=request.username_prefix,
            secret=request.secret,
            open_team_sheets=request.open_team_sheets,
        )
    except BaseException:
        if started is not None:
            started.stop()
        raise
    return session, started


def _start_replay_host() -> Any:
    return _start_simulator(None)


def _parse_input_log(lines: list[str], tag: str) -> InputLog:
    from center.showdown.sim_replay import parse_input_log

    return parse_input_log(lines, tag)


def _resimulate(host: Any, log: InputLog) -> Resimulated:
    from center.showdown.sim_replay import resimulate

    return resimulate(host, log)


# -- the table ------------------------------------------------------------------------------------

_SPECS = (
    BackendSpec(
        name="server",
        description="the Showdown server over WebSocket",
        seeded=False,
        outside_player=True,
        shared_usernames=False,
        takes_server_url=True,
        start=_start_server,
        session=_server_session,
        replay=None,  # the server draws its teams and rolls: nothing replays a battle exactly
    ),
    BackendSpec(
        name="sim",
        description="Showdown's seeded simulator (each battle replays exactly from its seed)",
        seeded=True,
        outside_player=False,
        shared_usernames=True,
        takes_server_url=False,
        start=_start_simulator,
        session=_sim_session,
        replay=BattleReplay(
            source="input log",
            suffix=".input.log",
            start=_start_replay_host,
            parse=_parse_input_log,
            run=_resimulate,
        ),
    ),
)

#: every backend by name, in the order the CLI lists them
BACKENDS: Mapping[str, BackendSpec] = MappingProxyType({spec.name: spec for spec in _SPECS})

#: where ``sep_main`` / ``sep_eval`` run battles unless told: the seeded simulator (docs/running.md)
DEFAULT_RUN_BACKEND: str = "sim"


def backend_spec(name: str) -> BackendSpec:
    """The backend called ``name``; EnvError (a clear one) for a name not in :data:`BACKENDS`."""
    spec = BACKENDS.get(name) if isinstance(name, str) else None
    if spec is None:
        raise EnvError(f"backend must be one of {', '.join(BACKENDS)}, got {name!r}")
    return spec


def server_url_backend() -> str:
    """The backend that ``--server`` (a Showdown server's URL) implies."""
    (name,) = (spec.name for spec in BACKENDS.values() if spec.takes_server_url)
    return name
