"""A rehearsal in the zygote before it forks: recorded battles played through a worker's
request handling (the wire, the replica battle, the decision), so that every forked worker finds
that code partly warm: Python's first runs of it and msgspec's and poke-env's lazy set-up are done
once here rather than in each worker (docs/performance.md has the figures).

The player is this module itself, a user module of the package's own (MapleAgent, the first
legal action): no participant's code runs here. The recordings are the checker's shipped samples,
read as data files.
"""

from __future__ import annotations

import gzip
import itertools
import json
import logging
from pathlib import Path
from typing import Any, Final

import gymnasium
import numpy as np

from edge.contract.candidates import Candidate
from edge.contract.game_type import is_doubles_format
from edge.contract.legality import decision_required
from edge.contract.policy import StandalonePolicy
from edge.maple.doubles_agent import MapleDoublesAgent
from edge.maple.maple_agent import MapleAgent
from edge.maple.replica import ReplicaBattle
from edge.service.server.dispatch import CallContext
from edge.service.worker.sessions import SessionHandlers
from edge.wire.envelopes import CODEC
from edge.wire.messages import (
    CloseSessionRequest,
    DecideReply,
    DecideRequest,
    EpisodeEndRequest,
    InstanceConfig,
    OpenSessionRequest,
    PolicyInfo,
    ResetRequest,
)
from edge.wire.msgpack_values import DEFAULT_MAX_MESSAGE_SIZE

__all__ = ["REHEARSED", "getUserAgentClass", "getUserPolicy", "play", "rehearse"]

logger = logging.getLogger(__name__)

SAMPLES: Final = Path(__file__).resolve().parents[2] / "checker" / "samples"
REHEARSED: Final = ("gen9bssfactory", "gen9randombattle", "gen9vgc2025regi")
"""The recordings played, one player's side of each: the singles and the doubles paths."""


def rehearse() -> None:
    """Play every recording of REHEARSED; never raises: a zygote that cannot rehearse forks
    cold workers, which play the same, only slower."""
    for battle_format in REHEARSED:
        try:
            play(battle_format)
        except Exception:
            logger.warning("no rehearsal of %s in the zygote", battle_format, exc_info=True)


def play(battle_format: str) -> list[DecideReply]:
    """One recorded battle of ``battle_format`` through a session, every request and reply
    encoded and decoded as on the wire: the decide replies, the last one the battle's end."""
    document = json.loads(gzip.decompress((SAMPLES / f"{battle_format}.json.gz").read_bytes()))
    username, frames = next(iter(document["frames"].items()))
    candidate = Candidate(
        model_id="rehearsal",
        module_id=__name__,
        args={"doubles": is_doubles_format(battle_format)},
        log_name="rehearsal",
        team=None,
        team_path=None,
        source=Path(__file__).resolve().parents[3] / "candidates.json",
    )
    handlers = SessionHandlers("blue", {"rehearsal": candidate}, capture=False).handlers()
    ids = itertools.count(1)

    def call(body: Any) -> Any:
        size = DEFAULT_MAX_MESSAGE_SIZE
        frames = CODEC.request(body, msg_id=f"r{next(ids)}", session="r", max_size=size)
        request = CODEC.decode_request(frames, size)
        envelope = request.envelope
        context = CallContext(envelope.type, envelope.id, "r")
        reply = handlers[envelope.type](context, request.body)
        return CODEC.decode_reply(
            CODEC.reply(envelope.id, envelope, reply, max_size=size), size
        ).body

    call(
        OpenSessionRequest(
            "rehearsal", InstanceConfig("blue", "player_0", battle_format, 0), username
        ),
    )
    call(ResetRequest("agent", 0))
    call(ResetRequest("policy"))
    # The center's cut: each decide carries the frames up to a request that asks for a decision.
    replica = ReplicaBattle(username, battle_format)
    decisions, sent, turn = [], 0, 0
    for index, frame in enumerate(frames):
        battle = replica.feed([frame])
        turn = battle.turn if battle is not None else turn
        if battle is not None and "|request|" in frame and decision_required(battle):
            info = PolicyInfo(needs_action=True, turn=turn)
            decisions.append(call(DecideRequest(frames[sent : index + 1], 0.0, info, False)))
            sent = index + 1
    # The battle's end, as the center ends it: the policy's last step with the last mask given.
    last = decisions[-1]
    info = PolicyInfo(needs_action=False, turn=turn, action_mask=last.action_mask)
    decisions.append(call(DecideRequest(frames[sent:], 1.0, info, True)))
    call(EpisodeEndRequest([]))
    call(CloseSessionRequest())
    return decisions


# -- the rehearsal's player (the user-module contract) ------------------------------------------


class FirstLegalPolicy(StandalonePolicy):
    """The first action the mask allows (each slot's, in doubles)."""

    def step(
        self,
        observation: Any,
        reward: float,
        done: bool,
        info: dict[str, Any],
        agentFullName: str,
        observation_space: gymnasium.Space[Any],
        action_space: gymnasium.Space[Any],
    ) -> Any:
        mask = np.asarray(info["action_mask"])
        if isinstance(action_space, gymnasium.spaces.MultiDiscrete):
            return [int(np.argmax(row)) for row in mask.reshape(len(action_space.nvec), -1)]
        return int(np.argmax(mask))


def getUserAgentClass(args: dict[str, Any]) -> type:
    return MapleDoublesAgent if args.get("doubles") else MapleAgent


def getUserPolicy(args: dict[str, Any]) -> FirstLegalPolicy:
    return FirstLegalPolicy()
