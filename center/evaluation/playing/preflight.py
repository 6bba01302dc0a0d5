"""What a run checks before its first battle, and what it says about failing sides at its end.

Before LOG_DIR exists: the entries that do not play the run's format are left out (a named one is
refused), every brought team passes Showdown's validator, and every model opens on each side it will
play, as a battle opens it. After the battles: one line per candidate whose side was not OK, with
its counts and its first error line.
"""

from __future__ import annotations

from center.errors import ConfigError, EdgeDown, InfrastructureError
from center.evaluation.playing.budget import Budget
from center.evaluation.playing.match import SideSource
from center.evaluation.playing.side_guard import SideGuard
from center.evaluation.playing.side_opening import open_sides
from center.evaluation.records import BattleRecord
from center.evaluation.schedule import ScheduledBattle
from center.showdown.formats import ShowdownFormat
from edge.contract.outcomes import SIDE_STATUSES

__all__ = ["check_models", "failure_summary", "playing_the_format", "validate_teams"]


def playing_the_format(
    ids: tuple[str, ...],
    named: set[str],
    formats: dict[str, tuple[str, ...]],
    battle_format: str,
) -> tuple[tuple[str, ...], str]:
    """The entries of ``ids`` that play ``battle_format`` (an entry without ``formats`` in
    candidates.json plays every format), and one line naming those left out ("" when none).

    An entry the command names (``named``) that does not play it is refused: ConfigError.
    """
    left_out = [i for i in ids if formats.get(i) and battle_format not in formats[i]]
    refused = [i for i in left_out if i in named]
    if refused:
        plays = "; ".join(f"{i!r} plays {', '.join(formats[i])} only" for i in refused)
        raise ConfigError(
            f"{', '.join(map(repr, refused))} {'does' if len(refused) == 1 else 'do'} not play "
            f"{battle_format} ({plays}, by candidates.json); name others, or give --format a "
            "format each plays"
        )
    if not left_out:
        return ids, ""
    why = "; ".join(f"{i} plays {', '.join(formats[i])}" for i in left_out)
    line = f"note: left out, not playing {battle_format}: {why}"
    return tuple(i for i in ids if i not in left_out), line


def validate_teams(teams: dict[str, str | None], battle_format: ShowdownFormat) -> None:
    """Check every candidate's team with Showdown's own validator, before any battle."""
    from center.showdown import validate_team

    if not battle_format.teams_brought:
        return
    for model_id, team in teams.items():
        if not team:
            raise ConfigError(
                f"candidate {model_id!r} has no team, and {battle_format.id} needs one "
                '(add "team": "path/to/team.txt" to its entry in candidates.json)'
            )
        problems = validate_team(team, battle_format.id)
        if problems:
            raise ConfigError(
                f"candidate {model_id!r}: Showdown rejects its team for {battle_format.id}: "
                + " ".join(problems)
            )


def check_models(
    source: SideSource, sides: dict[str, list[str]], battle_format: str, budget: Budget
) -> dict[str, str]:
    """Open (and close) each model on each side it will play, as a battle does: model -> problem.

    A model that cannot load is found here, in seconds, instead of in its first battle; so is
    one whose untrusted edge stays busy past ``--edge-wait`` (its battles are then void, or
    forfeited with ``--edge-loss forfeit``).
    """
    problems: dict[str, str] = {}
    for side, model_ids in sides.items():
        for model_id in model_ids:
            if model_id in problems:
                continue
            probe = ScheduledBattle(f"preflight-{model_id}", model_id, model_id, 0, ("", ""), 0)
            opened: dict[str, SideGuard] = {}

            def open_one(s: str, m: str = model_id, b: ScheduledBattle = probe) -> SideGuard:
                return source.open_side(m, s, b, battle_format, budget, "sep-preflight")

            try:  # waits while the edge has no worker for it (bounded for an untrusted edge)
                open_sides(opened, [side], open_one, source.close_side, f"the check of {model_id}")
            except InfrastructureError as exc:
                if isinstance(exc, EdgeDown):
                    raise
                problems[model_id] = str(exc).removeprefix(f"{probe.battle_id}: ")
                continue
            guard = opened[side]
            try:
                if guard.fatal is not None:
                    problems[model_id] = guard.stats.error_line or guard.stats.detail
            finally:
                source.close_side(guard)
    return problems


def failure_summary(records: list[BattleRecord]) -> list[str]:
    """One line per candidate whose side was not OK in some battle: counts and first error line."""
    counts: dict[str, dict[str, int]] = {}
    first: dict[str, tuple[str, str]] = {}
    for record in records:
        for model, status, error in (
            (record.blue, record.blue_side.status, record.blue_side.error),
            (record.red, record.red_side.status, record.red_side.error),
        ):
            if not SIDE_STATUSES[status].failure:
                continue
            tally = counts.setdefault(model, {})
            tally[status.value] = tally.get(status.value, 0) + 1
            if model not in first and error:
                first[model] = (record.battle_id, error)
    lines = []
    for model in sorted(counts):
        statuses = ", ".join(f"{n} {s}" for s, n in sorted(counts[model].items()))
        line = f"{model}: {statuses}"
        if model in first:
            battle_id, error = first[model]
            line += f"; first: {error} [{battle_id}]"
        lines.append(line)
    return (["sides that did not play cleanly:"] + [f"  {x}" for x in lines]) if lines else []
