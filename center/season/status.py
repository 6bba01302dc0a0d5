"""``sep_ladder status``: the season as the organizer reads it, from the store alone.

Flags, alarms and edges down, the entrants (state, participant, champion, cause), the queue (waiting,
running with their age, voided and given up), each format's board (provisional ratings marked)
and the latest events. :func:`season_status` is the same as a document (the web page's API).
"""

from __future__ import annotations

import json
import math
import time
from typing import Any

from center.season.entrants import champions
from center.season.heartbeat import edge_answering
from center.season.store import SeasonStore

__all__ = ["format_status", "season_status"]


def season_status(store: SeasonStore, formats: tuple[str, ...]) -> dict[str, Any]:
    """The season now: flags, alarms, entrants, queue, boards and events, as plain data."""
    now = time.time()
    entrants = store.entrants()
    chosen = set(champions(entrants).values())
    queue = store.queue()
    return {
        "paused": store.flag("paused"),
        "closing": store.flag("closing"),
        "closed_at": store.meta("closed_at"),
        "alarms": json.loads(store.meta("alarms") or "[]"),
        # {"since", "why"} while play waits for an edge (every entry plays on both)
        "edges_down": json.loads(store.meta("edges_down") or "null"),
        # each side's heartbeat: {"ok", "checked", "at" (its last answer), "why"}
        "edges_seen": {
            side: {**seen, "answering": edge_answering(seen, now)}
            for side, seen in json.loads(store.meta("edges_seen") or "{}").items()
        },
        "entrants": [
            {
                "entry": e.entry,
                "participant": e.participant,
                "baseline": e.baseline,
                "state": e.state.value,
                "champion": e.entry in chosen,
                "final": e.final,
                "cause": e.cause,
                "formats": list(e.formats),
            }
            for e in entrants.values()
        ],
        "queue": {
            "waiting": sum(1 for q in queue if not q.given_up),
            "running": [
                {"battle_id": row["battle_id"], "age_s": round(now - float(row["started_at"]), 1)}
                for row in store.conn.execute(
                    "SELECT battle_id, started_at FROM queue WHERE started_at IS NOT NULL"
                )
            ],
            "retrying": sum(1 for q in queue if q.voids and not q.given_up),
            "given_up": [q.battle.battle_id for q in queue if q.given_up],
        },
        "battles": len(store.battles()),
        "boards": {f: store.latest_board(f) for f in formats},
        "events": store.events(limit=15),
    }


def _rating(row: dict[str, Any]) -> str:
    r, lo, hi = row.get("rating"), row.get("rating_lo"), row.get("rating_hi")
    if not isinstance(r, (int, float)) or math.isnan(r):
        return "-"
    interval = f" [{lo:.0f}, {hi:.0f}]" if isinstance(lo, float) and isinstance(hi, float) else ""
    return f"{r:.0f}{interval}"


def format_status(doc: dict[str, Any]) -> str:
    """:func:`season_status`'s document as text for the terminal."""
    flags = [k for k in ("paused", "closing") if doc[k]]
    lines = [
        f"season: {doc['battles']} battles"
        + (f", closed at {doc['closed_at']}" if doc["closed_at"] else "")
        + (f" ({', '.join(flags)})" if flags else "")
    ]
    lines += [f"ALARM: {a}" for a in doc["alarms"]]
    down = doc["edges_down"]
    if down:
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(down["since"]))
        lines.append(f"EDGES DOWN since {since}Z: {down['why']}; every entry's play paused")
    for side, seen in sorted(doc["edges_seen"].items()):
        if not seen["answering"] and seen.get("ok") is False:
            last = seen.get("at")
            since = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(last)) + "Z" if last else "never"
            lines.append(
                f"EDGE {side} not answering its heartbeat (last answer {since}): {seen['why']}"
            )
    lines.append("entrants:")
    for e in doc["entrants"]:
        mark = "baseline" if e["baseline"] else "champion" if e["champion"] else ""
        cause = f"  {e['cause']}" if e["cause"] else ""
        lines.append(f"  {e['entry']:<20} {e['participant']:<16} {e['state']:<12} {mark:<9}{cause}")
    q = doc["queue"]
    running = ", ".join(f"{r['battle_id']} ({r['age_s']:.0f} s)" for r in q["running"]) or "none"
    lines.append(
        f"queue: {q['waiting']} waiting, {q['retrying']} retrying after a void, "
        f"{len(q['given_up'])} given up; running: {running}"
    )
    for battle_format, board in doc["boards"].items():
        if not board:
            lines.append(f"board {battle_format}: no refit yet")
            continue
        lines.append(f"board {battle_format} ({board['battles']} battles, at {board['at']}):")
        for row in board["rows"]:
            mark = " provisional" if row["provisional"] else ""
            lines.append(
                f"  {row['rank']:>3}  {row['entry']:<20} {_rating(row):<18} {row['wins']:>4} W "
                f"{row['losses']:>4} L  {row['battles']:>4} battles  {row['state']}{mark}"
            )
    lines.append("events (newest first):")
    for event in doc["events"]:
        at = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(event["at"]))
        lines.append(f"  {at}Z  {event['kind']:<12} {event['message']}")
    return "\n".join(lines)
