"""The timers players know, by name (``sep_main --timer NAME``): :data:`TIMERS`, the one table.

Showdown's own (``ladder``, ``blitz``, ``vgc``) come from the pinned server/room-battle.ts and
data/rulesets.ts; ``standard`` and ``extended`` are this project's. :func:`effective_budget` applies
a profile with the command line's explicit numbers over it; :func:`timer_record` is what run.json
keeps, and :func:`timer_line` what a run says at start.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from center.errors import ConfigError
from center.evaluation.playing.budget import Budget
from edge.options import OPTION, option_fields

__all__ = [
    "DEFAULT_TIMER",
    "OVERRIDES",
    "TIMERS",
    "TimerProfile",
    "budget_parts",
    "effective_budget",
    "timer_line",
    "timer_record",
]


@dataclass(frozen=True)
class TimerProfile:
    """A named timer: its :class:`Budget` and where its numbers come from."""

    budget: Budget
    #: what it is for, in a few words; ``--help`` adds its numbers (:attr:`summary`)
    purpose: str
    #: where each number comes from (docs/running.md repeats it)
    source: str

    @property
    def summary(self) -> str:
        """What ``--help`` says of it: its purpose, then its numbers read from its budget."""
        numbers = [*budget_parts(self.budget), f"a {self.budget.battle_time:g} s battle clock"]
        return f"{self.purpose} ({', '.join(numbers)})"


#: A Showdown timer has no free time and no battle clock: what a side spends comes from its bank,
#: capped per turn; the battle clock here is only a backstop above what the bank can give in
#: ``max_turns`` (300) turns, session opening included (tests/unit/test_timers.py checks it).
TIMERS: dict[str, TimerProfile] = {
    "standard": TimerProfile(
        Budget(),
        "this project's default",
        "this project's budget",
    ),
    "extended": TimerProfile(
        Budget(decision_time=30.0, bank=300.0, call_cap=60.0, battle_time=1800.0),
        "for LLM agents",
        "this project's, after PokéAgent's extended timer",
    ),
    "ladder": TimerProfile(
        Budget(
            decision_time=0.0,
            bank=150.0,
            grace=60.0,
            increment=10.0,
            turn_time=150.0,
            first_turn_time=150.0,
            call_cap=150.0,
            battle_time=3600.0,
            tie_when_both_out=True,
        ),
        "Showdown's ladder",
        "server/room-battle.ts: STARTING_TIME 150, STARTING_GRACE_TIME 60, addPerTurn 10 "
        "(singles), MAX_TURN_TIME 150",
    ),
    "blitz": TimerProfile(
        Budget(
            decision_time=0.0,
            bank=15.0,
            grace=30.0,
            increment=5.0,
            turn_time=15.0,
            first_turn_time=40.0,
            call_cap=40.0,
            battle_time=1800.0,
            tie_when_both_out=True,
        ),
        "Showdown's Blitz",
        "data/rulesets.ts, blitz: Timer Starting 15, Grace 30, Add Per Turn 5, Max Per Turn 15, "
        "Max First Turn 40",
    ),
    "vgc": TimerProfile(
        Budget(
            decision_time=0.0,
            bank=420.0,
            grace=90.0,
            increment=0.0,
            turn_time=55.0,
            first_turn_time=90.0,
            call_cap=90.0,
            battle_time=600.0,
            tie_when_both_out=True,
        ),
        "Showdown's VGC timer",
        "data/rulesets.ts, vgctimer: Timer Starting 420, Grace 90, Add Per Turn 0, Max Per "
        "Turn 55, Max First Turn 90, Timeout Auto Choose",
    ),
}

DEFAULT_TIMER = "standard"
"""The profile of a run that names none: today's budget."""

#: The command-line options that override a profile's field: option name -> Budget field (the
#: fields whose metadata declares an option).
OVERRIDES = {f.metadata[OPTION].flags[0]: f.name for f in option_fields(Budget)}


def effective_budget(name: str, given: dict[str, float | None]) -> Budget:
    """Profile ``name``'s budget with the explicit numbers ``given`` (Budget field -> value, None
    when not given) over its fields; ConfigError (one line) for an unknown profile."""
    profile = TIMERS.get(name)
    if profile is None:
        raise ConfigError(f"unknown --timer {name!r}; known: {', '.join(TIMERS)}")
    changes: dict[str, Any] = {field: value for field, value in given.items() if value is not None}
    return dataclasses.replace(profile.budget, **changes)


def timer_record(name: str, budget: Budget) -> dict[str, Any]:
    """What run.json keeps of a run's timer: its profile and every number that applies."""
    numbers = dataclasses.asdict(budget)
    numbers.pop("max_invalid_retries")
    return {"name": name, **numbers}


def budget_parts(budget: Budget) -> list[str]:
    """A budget's numbers in words: free time, bank, increment, the cap of a turn or a call."""
    parts = [f"{budget.decision_time:g} s free per decision", f"a {budget.bank:g} s bank"]
    if budget.grace:
        parts[-1] += f" (+{budget.grace:g} s grace)"
    if budget.increment:
        parts.append(f"+{budget.increment:g} s a turn")
    if budget.turn_time is not None:
        first = budget.turn_cap(True)
        parts.append(
            f"at most {budget.turn_time:g} s a turn"
            + (f" ({first:g} s the first)" if first != budget.turn_time else "")
        )
    else:
        parts.append(f"at most {budget.call_cap:g} s a call beyond the free time")
    return parts


def timer_line(name: str, budget: Budget) -> str:
    """The time each side has, said at start-up (the battle clock bounds a battle's cost)."""
    parts = budget_parts(budget)
    out = "a turn out of time plays the default move while the bank lasts"
    if budget.tie_when_both_out:
        out += "; both sides out in one round is a tie"
    profile = TIMERS[name].budget
    given = [
        f"{option} {getattr(budget, field):g}"
        for option, field in OVERRIDES.items()
        if getattr(budget, field) != getattr(profile, field)
    ]
    label = f"{name} with {', '.join(given)}" if given else name
    return (
        f"timer {label}: {', '.join(parts)}; "
        f"{out}; a battle clock of {budget.battle_time:g} s for all its calls (--battle-time; "
        "running out forfeits)"
    )
