"""The recorded battles through the checker's sandboxed edge, as a battle drives them.

For each recorded sample :class:`RecordedBattles` sends what a center sends: ``open_session``,
``reset``, one ``decide`` per recorded decision point, a last ``decide`` with ``done``,
``episode_end`` and ``close_session``. Every verdict is computed here from the decoded reply, with
the edge's own rules and the checker's own replica of the battle.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from gymnasium import spaces
from poke_env.battle import AbstractBattle

from edge.checker.calls import EdgeCalls, Stuck, WorkerDied, describe_body
from edge.checker.checks import (
    check_action,
    check_action_mask,
    check_observation,
    check_order,
    multi_discrete_parts,
    short_repr,
)
from edge.checker.loading import failed_checks, load_timeout, record_failure, record_opened
from edge.checker.report import Tally
from edge.checker.samples import DecisionPoint, SampleBattle, decision_points
from edge.contract.agent import SEED_BOUND
from edge.contract.candidates import Candidate
from edge.errors import ContractError, ReplicaError, UserCallTimeout
from edge.maple.replica import ReplicaBattle
from edge.wire.messages import (
    CloseSessionRequest,
    DecideReply,
    DecideRequest,
    EpisodeEndRequest,
    ErrorBody,
    ErrorCode,
    InstanceConfig,
    OpenSessionReply,
    OpenSessionRequest,
    PolicyInfo,
    RequestType,
    ResetRequest,
)

logger = logging.getLogger(__name__)

__all__ = ["RecordedBattles", "sample_seed"]


def sample_seed(index: int) -> int:
    """The seed of the ``index``-th recorded sample: the top of the range a battle may give (an
    Agent that cannot take large seeds fails here, not in its battles)."""
    return SEED_BOUND - 1 - index


class _SampleProblem(Exception):
    """The recorded battle itself cannot be replayed (a frame the replica cannot apply)."""


@dataclass
class _HandlerFailure(Exception):
    """The edge answered a request with an error: ``error``, raised by the user call it names
    (``error.call``: makeObs, action_mask, policy.step or deploy; "" when it names none)."""

    error: ErrorBody


@dataclass
class _Session:
    """One recorded battle played in one session of the checker's edge."""

    session_id: str
    sample: SampleBattle
    #: the checker's own replica of the battle, fed the frames sent: orders are judged on it
    replica: ReplicaBattle
    #: the spaces as the center receives them (decoded from open_session's reply)
    observation_space: Any = None
    action_space: Any = None

    def battle(self, frames: list[str]) -> AbstractBattle:
        """The battle after ``frames``, as the worker's replica sees it."""
        battle = self.replica.feed(frames)
        if battle is None:
            raise _SampleProblem("no battle frames were applied")
        return battle


class RecordedBattles:
    """Plays recorded battles through the checker's edge; records each check's trials.

    ``tallies`` are the run's, keyed by check name; ``calls`` sends every request under
    ``call_limit`` seconds (``load_limit`` for ``open_session``). What was played is counted in
    :attr:`decisions` (per kind of request) and :attr:`sessions`; what was seen in :attr:`notes`.
    """

    def __init__(
        self,
        calls: EdgeCalls,
        tallies: dict[str, Tally],
        *,
        call_limit: float,
        load_limit: float,
        candidate: Candidate,
    ) -> None:
        self.calls = calls
        self.tallies = tallies
        self.call_limit = call_limit
        self.load_limit = load_limit
        self.candidate = candidate
        self.user_folder: Path = candidate.folder
        self.notes: list[str] = []
        self.decisions: dict[str, int] = {}
        self.sessions = 0
        #: what the last policy.step (done=True) raised, per battle end (a battle only logs it)
        self.final_step_failures: list[str] = []
        #: seconds the slowest open_session took (a battle gives load_limit for all of it)
        self.load_seconds = 0.0
        #: a loading check of the model (not of one Agent) failed: no more sessions are opened
        self.unloadable = False

    def handle(
        self,
        session: _Session,
        request_type: RequestType,
        body: Any,
        *,
        label: str,
        where: str,
        load: bool = False,
    ) -> Any:
        """One request served by the edge, as a battle's; the reply body.

        Raises _HandlerFailure for an error reply, UserCallTimeout (the run is then stuck),
        WorkerDied or Stuck.
        """
        limit, kind = (self.load_limit, "load") if load else (self.call_limit, "decision")
        if request_type == RequestType.CLOSE_SESSION:
            kind = "close"  # the edge's, no user call
        try:
            reply = self.calls.call(
                f"{label} at {where}",
                request_type,
                body,
                session.session_id,
                limit=limit,
                kind=kind,
            )
        except UserCallTimeout as exc:
            self.tallies["time"].fail(load_timeout(limit) if load else str(exc))
            raise
        if not reply.ok:
            raise _HandlerFailure(reply.body)
        return reply.body

    def failure_message(self, failure: _HandlerFailure, where: str, label: str = "") -> str:
        """What user call raised what, where in the user's code, at which decision point.

        ``label`` names the call when the error does not.
        """
        error = failure.error
        described = describe_body(error, self.user_folder)
        if error.ename == "ContractError":
            return f"{described} at {where}"
        if error.ename == "ProtocolError":
            return f"the reply cannot be sent to the center: {error.evalue} at {where}"
        label = label or error.call or "the handler"
        return f"{label} raised {described} at {where}"

    def hook(self, session: _Session, body: ResetRequest | EpisodeEndRequest, where: str) -> None:
        """A reset or an episode end: its failure fails the ``hooks`` check."""
        if isinstance(body, ResetRequest):
            request_type, label = RequestType.RESET, f"{body.target} reset"
            name = "policy.reset" if body.target == "policy" else "agent.seed / agent.reset"
        else:
            request_type, label = RequestType.EPISODE_END, "episode end"
            name = "agent.onEpisodeEnd"
        try:
            self.handle(session, request_type, body, label=label, where=where)
            self.tallies["hooks"].ok()
        except _HandlerFailure as failure:
            self.tallies["hooks"].fail(self.failure_message(failure, where, name))

    # -- the recorded battles ---------------------------------------------------------------------

    def play_all(self, samples: list[SampleBattle]) -> None:
        """Every recorded sample, each in a session of its own, as a battle plays it."""
        for i, sample in enumerate(samples):
            if self.unloadable:
                return
            replica = ReplicaBattle(sample.username, sample.battle_format, self.candidate.team)
            session = _Session(f"checker-{i}", sample, replica)
            try:
                if not self.open(session, seed=sample_seed(i)):
                    continue
                self.sessions += 1
                try:
                    self.play(session, seed=sample_seed(i))
                finally:
                    self.close(session)
            except _SampleProblem as exc:
                self.notes.append(f"sample {sample.name} could not be replayed: {exc}")
            except (UserCallTimeout, Stuck, WorkerDied):
                return

    def open(self, session: _Session, seed: int) -> bool:
        """open_session: the loading checks (:mod:`edge.checker.loading`); whether it opened."""
        sample, where = session.sample, f"{session.sample.name}, open"
        config = InstanceConfig("blue", "player_0", sample.battle_format, seed)
        request = OpenSessionRequest(self.candidate.model_id, config, sample.username)
        start = time.monotonic()
        try:
            reply: OpenSessionReply = self.handle(
                session,
                RequestType.OPEN_SESSION,
                request,
                label="open_session",
                where=where,
                load=True,
            )
        except _HandlerFailure as failure:
            failed = failed_checks(failure.error)
            record_failure(self.tallies, failed, self.failure_message(failure, where))
            self.unloadable = not {"agent_init", "agent_methods", "spaces"} & set(failed)
            self.close(session)  # as a center does: the edge frees the session's worker
            return False
        finally:
            self.load_seconds = max(self.load_seconds, time.monotonic() - start)
        record_opened(self.tallies, self.candidate.module_id, reply)
        session.observation_space = reply.observation_space
        session.action_space = reply.action_space
        return True

    def close(self, session: _Session) -> None:
        if self.calls.stuck or self.calls.died:
            return
        try:
            self.handle(
                session,
                RequestType.CLOSE_SESSION,
                CloseSessionRequest(),
                label="close_session",
                where=session.sample.name,
            )
        except _HandlerFailure as exc:
            logger.debug("closing session %s: %r", session.session_id, exc)

    def play(self, session: _Session, seed: int) -> None:
        """The session's resets, every decision point, then the battle's end."""
        sample = session.sample
        start = f"{sample.name}, start"
        self.hook(session, ResetRequest("agent", seed), start)
        self.hook(session, ResetRequest("policy"), start)
        last = -1
        point: DecisionPoint | None = None
        try:
            for point in decision_points(sample):
                frames = list(sample.frames[last + 1 : point.index + 1])
                last = point.index
                kind = point.kind
                self.decide(session, point, frames)
                self.decisions[kind] = self.decisions.get(kind, 0) + 1
        except ReplicaError as exc:
            raise _SampleProblem(str(exc)) from exc
        if point is None:
            raise _SampleProblem("the battle asked for no decision")
        # Once the replay is exhausted, the last point's battle is the finished battle.
        self.end(session, list(sample.frames[last + 1 :]), point.battle)

    def observation_failed(self, failure: _HandlerFailure, where: str) -> None:
        name = "action_mask" if failure.error.call == "action_mask" else "observation"
        self.tallies[name].fail(self.failure_message(failure, where))

    def check_observation(self, session: _Session, reply: DecideReply, where: str) -> bool:
        """The observation as the center decoded it, checked against the session's space;
        whether it is accepted."""
        try:
            check_observation(reply.observation, session.observation_space)
        except ContractError as exc:
            self.tallies["observation"].fail(f"{exc} at {where}")
            return False
        self.tallies["observation"].ok()
        return True

    def decide(self, session: _Session, point: DecisionPoint, frames: list[str]) -> None:
        """One decision, as a battle makes it: one ``decide`` request (makeObs, action_mask,
        policy.step and deploy on the edge), with the info the center gives the step. Every
        verdict is the checker's, from the observation, mask, action and order replied."""
        t = self.tallies
        where = point.where
        # What the center knows of the request from its own battle (here the sample's replay).
        team_preview = bool(point.battle.teampreview)
        info = PolicyInfo(  # no action_mask: the edge puts the Agent's mask there
            needs_action=True,
            team_preview=team_preview,
            turn=point.battle.turn,
            battle_tag=point.battle.battle_tag,
        )
        try:
            battle = session.battle(frames)
        except ReplicaError as exc:
            raise _SampleProblem(str(exc)) from exc
        try:
            reply: DecideReply = self.handle(
                session,
                RequestType.DECIDE,
                DecideRequest(frames, 0.0, info),
                label="makeObs + action_mask + policy.step + deploy",
                where=where,
            )
        except _HandlerFailure as failure:
            self.observation_failed(failure, where)
            return
        accepted = self.check_observation(session, reply, where)
        if accepted and not reply.stepped:  # an honest worker steps on every valid observation
            t["policy_step"].fail(
                f"the reply has no policy step, for a valid observation, at {where}"
            )
            return
        if not reply.stepped:
            return  # no step: a battle penalizes the observation and asks again
        space = session.action_space
        mask: np.ndarray | None = None
        try:
            mask = check_action_mask(reply.action_mask, space)
            if mask is not None:
                t["action_mask"].ok("a legal action at every decision point")
        except ContractError as exc:
            t["action_mask"].fail(f"{exc} at {where}")
        if reply.step_error is not None:
            described = describe_body(reply.step_error, self.user_folder)
            t["policy_step"].fail(f"policy.step raised {described} at {where}")
            return
        action, order, deploy_error = reply.action, reply.order, reply.deploy_error
        try:
            check_action(action, space, team_preview=team_preview)
            t["policy_step"].ok()
        except ContractError as exc:
            t["policy_step"].fail(f"{exc} at {where}")
            return

        if mask is not None and not team_preview and isinstance(space, spaces.Discrete):
            if mask[int(action)]:
                t["legal_actions"].ok("every action the policy chose was legal by the mask")
            else:
                legal = [int(i) for i in np.flatnonzero(mask)]
                t["legal_actions"].fail(
                    f"policy.step chose action {int(action)}, which action_mask marks illegal "
                    f"(legal: {legal}) at {where}; a battle penalizes it and asks again"
                )
                return
        parts = None if mask is None or team_preview else multi_discrete_parts(mask, space)
        if parts is not None:
            chosen = [int(a) for a in np.asarray(action).ravel()]
            wrong = [
                i for i, (part, a) in enumerate(zip(parts, chosen, strict=True)) if not part[a]
            ]
            if not wrong:
                t["legal_actions"].ok("every action the policy chose was legal by the mask")
            else:
                t["legal_actions"].fail(
                    f"policy.step chose action {chosen}, whose part {wrong[0] + 1} action_mask "
                    f"marks illegal (legal there: {[int(i) for i in np.flatnonzero(parts[wrong[0]])]}"
                    f") at {where}; a battle penalizes it and asks again"
                )
                return
        if order is None and deploy_error is None:  # an honest worker deploys an accepted action
            t["deploy"].fail(f"the reply has no order for action {short_repr(action)} at {where}")
            return
        if deploy_error is not None:
            if mask is None and deploy_error.code == ErrorCode.INVALID_ACTION:
                # Without a mask the policy cannot know; a battle penalizes this, it is no crash.
                t["legal_actions"].fail(
                    f"deploy refused action {short_repr(action)} as illegal at {where}; give the "
                    f"Agent an action_mask(battle) so that policies can avoid illegal actions"
                )
            elif deploy_error.ename == "ContractError":
                t["deploy"].fail(f"{deploy_error.evalue} at {where}")
            else:
                t["deploy"].fail(
                    f"deploy raised {describe_body(deploy_error, self.user_folder)} at {where}"
                )
            return
        try:
            check_order(battle, order)
            t["deploy"].ok("every order was legal for its request")
        except ContractError as exc:
            t["deploy"].fail(f"{exc} at {where}")

    def end(self, session: _Session, frames: list[str], battle: AbstractBattle) -> None:
        """The battle's end, as a battle ends: one ``decide`` with ``done`` (the last
        observation and the policy's last step), then ``episode_end``."""
        where = f"{session.sample.name}, end"
        reward = 1.0 if battle.won else -1.0 if battle.lost else 0.0
        space = session.action_space
        info = PolicyInfo(
            needs_action=False,
            action_mask=np.zeros(int(space.n), dtype=np.int8)
            if isinstance(space, spaces.Discrete)
            else None,
            turn=battle.turn,
            battle_tag=battle.battle_tag,
            end_reason="win" if battle.won or battle.lost else "tie",
        )
        try:
            session.battle(frames)
        except ReplicaError as exc:
            raise _SampleProblem(str(exc)) from exc
        try:
            reply: DecideReply = self.handle(
                session,
                RequestType.DECIDE,
                DecideRequest(frames, reward, info, done=True),
                label="makeObs + action_mask + policy.step (done)",
                where=where,
            )
        except _HandlerFailure as failure:
            self.observation_failed(failure, where)
        else:
            self.check_observation(session, reply, where)
            # A battle ignores what this last step returns, and only logs what it raises.
            if reply.step_error is not None:
                described = describe_body(reply.step_error, self.user_folder)
                self.final_step_failures.append(f"policy.step raised {described} at {where}")
        self.hook(session, EpisodeEndRequest([]), where)
