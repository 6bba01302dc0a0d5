"""Count the module stops of a decision's path through the project's own code, in one process.

    python scripts/count_hops.py [--candidate random] [--seed 1] [--round 1] [--path] [--calls]

One seeded battle on Showdown's simulator between two in-process sides, played by ``play_one``
and traced with ``sys.setprofile``; a round is one pass of the battle loop. A stop is a module of
center/ or edge/ where the innermost frame stays; one the path already left counts as a return.
"framework": each stay in the Agent's library (edge.maple) is one stop (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import collections
import importlib
import os
import statistics
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import center

#: The tree whose code runs: the one the interpreter imports ``center`` from (a checkout's .venv),
#: which need not be this script's.
ROOT = Path(center.__file__).resolve().parent.parent
PACKAGES = ("center", "edge")
PLAYERS = ("player_0", "player_1")
#: The modules that read Showdown's request: 9439ea6's four (issue 45), then those that replaced
#: them, so that the same count reads both trees.
REQUEST_MODULES = frozenset(
    {
        "edge.contract.orders",
        "edge.contract.request",
        "edge.contract.party",
        "edge.contract.doubles_orders",
        "edge.contract.legality",
        "edge.contract.showdown_request",
        "edge.contract.doubles_slots",
    }
)
#: Where the entry points live: main's layout, then 9439ea6's (before center/evaluation was split
#: into playing, recording and judging), so that one copy of this script measures both.
PLAYING = ("center.evaluation.playing", "center.evaluation")
#: What the framework's view calls a stay in the Agent's library (the sample agents' MapleAgent).
AGENT = "(the Agent: edge.maple)"


def module_of(filename: str, cache: dict[str, str | None]) -> str | None:
    """The dotted name of a project module's file (None outside center/ and edge/)."""
    if filename not in cache:
        name: str | None = None
        path = Path(filename)
        if path.suffix == ".py" and path.is_absolute():
            try:
                parts = path.resolve().relative_to(ROOT).with_suffix("").parts
            except ValueError:
                parts = ()
            if parts and parts[0] in PACKAGES:
                name = ".".join(p for p in parts if p != "__init__")
        cache[filename] = name
    return cache[filename]


@dataclass
class Step:
    """The innermost project module after one call or return, and whose span it is in."""

    module: str
    by: str  # "call" or "return"
    owner: str | None  # the player whose objects the span's root call took (None: shared)
    agent: bool = False  # inside the Agent's own library (edge.maple) on the user-code thread
    function: str = ""  # a call's function (its qualified name)


@dataclass
class Stops:
    """A sequence of stops and what it counts."""

    stops: list[str] = field(default_factory=list)
    by: list[str] = field(default_factory=list)

    @classmethod
    def of(cls, steps: list[Step], player: str | None, *, agent: bool = True) -> Stops:
        """The stops of ``steps``, less the other player's spans (``player`` None: both);
        ``agent`` False: each stay in the Agent's library is one stop, ``AGENT``."""
        path = cls()
        for step in steps:
            if player is not None and step.owner not in (None, player):
                continue
            module = AGENT if step.agent and not agent else step.module
            if path.stops and path.stops[-1] == module:
                continue
            path.stops.append(module)
            path.by.append(step.by)
        return path

    def returns(self) -> list[int]:
        """The indices of the stops in a module the path had already left."""
        return [i for i, m in enumerate(self.stops) if m in self.stops[:i]]

    def summary(self) -> str:
        back = self.returns()
        by_return = sum(1 for i in back if self.by[i] == "return")
        among = sum(
            1
            for i in back
            if self.stops[i] in REQUEST_MODULES and self.stops[i - 1] in REQUEST_MODULES
        )
        return (
            f"{len(self.stops)} stops, {len(back)} returns to a module already left "
            f"({by_return} by a return, {len(back) - by_return} by a call), {among} of them "
            f"between two request modules, {len(set(self.stops))} modules"
        )


class Tracer:
    """``sys.setprofile``'s function: the battle loop's rounds, as steps."""

    def __init__(self) -> None:
        self.cache: dict[str, str | None] = {}
        self.rounds: list[list[Step]] = []
        self.loop: FrameType | None = None  # drive_battle's frame, once the first round starts
        self.owners: dict[int, str] = {}
        self.owner: str | None = None
        self.root: FrameType | None = None  # the call that made ``owner``'s span
        self.thread = 0  # the battle's thread
        self.in_agent = 0  # edge.maple frames on the user-code thread's stack

    def __call__(self, frame: FrameType, event: str, arg: Any) -> None:
        if event not in ("call", "return"):
            return
        module = module_of(frame.f_code.co_filename, self.cache)
        if module is None:
            return
        caller = frame.f_back
        # The user's code runs on a thread of its own while the battle's thread waits for it: its
        # steps are in the span of the player the battle's thread is deciding for.
        battle_thread = threading.get_ident() == self.thread
        if event == "call":
            name = frame.f_code.co_name
            if name == "drain" and caller is not None and caller.f_code.co_name == "drive_battle":
                self._new_round(caller)
                battle_thread = True
            if self.loop is None:
                return
            if self.owner is None and battle_thread:
                self._claim(frame)
            if not battle_thread and module.startswith("edge.maple"):
                self.in_agent += 1
            step = Step(module, "call", self.owner, self.in_agent > 0, frame.f_code.co_qualname)
            self.rounds[-1].append(step)
            return
        if self.loop is None:
            return
        if frame is self.loop:  # the battle is over: no more rounds
            self.loop = None
            return
        if frame is self.root:
            self.owner, self.root = None, None
        if not battle_thread and module.startswith("edge.maple"):
            self.in_agent -= 1
        while caller is not None and module_of(caller.f_code.co_filename, self.cache) is None:
            caller = caller.f_back
        if caller is not None:
            into = module_of(caller.f_code.co_filename, self.cache)
            assert into is not None
            self.rounds[-1].append(Step(into, "return", self.owner, self.in_agent > 0))

    def _new_round(self, loop: FrameType) -> None:
        """A round starts at drive_battle's ``session.drain()``: note each player's objects."""
        self.loop, self.thread = loop, threading.get_ident()
        self.rounds.append(
            [Step(module_of(loop.f_code.co_filename, self.cache) or "", "call", None)]
        )
        sides, session = loop.f_locals["sides"], loop.f_locals["session"]
        self.owners = {}
        for p in PLAYERS:
            seat, guard = session.seats[p], sides[p]
            for thing in (seat, seat.view, seat.replica, guard, guard.side, guard.stats):
                if thing is not None:
                    self.owners[id(thing)] = p

    def _claim(self, frame: FrameType) -> None:
        """A call that takes one player's seat, view, side or name starts that player's span."""
        for value in frame.f_locals.values():
            owner = value if isinstance(value, str) and value in PLAYERS else None
            owner = owner or self.owners.get(id(value))
            if owner is not None:
                self.owner, self.root = owner, frame
                return


def playing(name: str) -> Any:
    """The module ``name`` of the playing room, wherever this tree has it."""
    for package in PLAYING:
        try:
            return importlib.import_module(f"{package}.{name}")
        except ModuleNotFoundError:
            continue
    raise SystemExit(f"no {name} module under {' or '.join(PLAYING)}")


def play_traced(candidates: Path, candidate: str, seed: int, battle_format: str) -> Tracer:
    """Play one battle of ``candidate`` against itself, traced."""
    from center.env.pokemon_env import PokemonEnv
    from center.evaluation.schedule import schedule_match
    from center.showdown.sim_seeds import RunSecret

    match, in_process = playing("match"), playing("in_process")
    secret = RunSecret.from_seed(seed)
    scheduled = schedule_match(candidate, candidate, 1, seed)[0]
    source = in_process.InProcessSource(candidates)
    tracer = Tracer()
    host = match.start_backend("sim")
    try:
        with tempfile.TemporaryDirectory() as log_dir:
            settings = match.MatchSettings(
                battle_format, Path(log_dir), backend="sim", run_secret=secret
            )
            env = PokemonEnv(
                battle_format, backend="sim", server=host, username_prefix="hops", run_secret=secret
            )
            try:
                threading.setprofile(tracer)  # the sides' user-code threads start in play_one
                sys.setprofile(tracer)
                try:
                    match.play_one(env, scheduled, source, settings)
                finally:
                    sys.setprofile(None)
                    threading.setprofile(None)
            finally:
                env.close()
    finally:
        host.stop()
    return tracer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--candidates", type=Path, default=ROOT / "candidates.json")
    parser.add_argument("--candidate", default="random", help="the model of both sides")
    parser.add_argument("--format", default="gen9bssfactory", dest="battle_format")
    parser.add_argument("--seed", type=int, default=1, help="the battle (the same on any tree)")
    parser.add_argument("--round", type=int, default=1, help="the round shown (0: team preview)")
    parser.add_argument("--path", action="store_true", help="print the round's stops")
    parser.add_argument(
        "--calls", action="store_true", help="print the round's calls by function (player_0)"
    )
    args = parser.parse_args()
    tracer = play_traced(args.candidates, args.candidate, args.seed, args.battle_format)
    rounds = tracer.rounds
    if not 0 <= args.round < len(rounds):
        raise SystemExit(f"the battle had {len(rounds)} rounds: no round {args.round}")
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"tree {ROOT}, Python {sys.version.split()[0]}, load average {load}")
    print(
        f"battle: {args.battle_format}, seed {args.seed}, {args.candidate} against itself "
        f"in-process on the simulator, {len(rounds)} rounds"
    )
    chosen = rounds[args.round]
    for agent, view in ((True, "all"), (False, "framework")):
        for player in (*PLAYERS, None):
            who = player or "both players"
            summary = Stops.of(chosen, player, agent=agent).summary()
            print(f"{view}: round {args.round}, {who}: {summary}")
        # Every round but the last (which ends the battle): the median of each count, player_0.
        paths = [Stops.of(steps, PLAYERS[0], agent=agent) for steps in rounds[:-1] or [chosen]]
        stops = statistics.median(len(p.stops) for p in paths)
        back = statistics.median(len(p.returns()) for p in paths)
        print(
            f"{view}: median over {len(paths)} rounds, player_0: {stops:g} stops, {back:g} returns"
        )
    if args.calls:
        calls = collections.Counter(
            f"{s.module}:{s.function}"
            for s in chosen
            if s.by == "call" and s.owner in (None, PLAYERS[0]) and not s.agent
        )
        print(f"framework: round {args.round}, player_0: {calls.total()} calls")
        for name, n in sorted(calls.items(), key=lambda item: (-item[1], item[0])):
            print(f"{n:5d} {name}")
    if args.path:
        path = Stops.of(chosen, PLAYERS[0], agent=False)
        back_at = set(path.returns())
        for i, module in enumerate(path.stops):
            print(f"{i:4d} {path.by[i]:6s} {'*' if i in back_at else ' '} {module}")


if __name__ == "__main__":
    main()
