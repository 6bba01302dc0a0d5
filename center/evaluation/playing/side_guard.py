"""SideGuard: one side's decisions behind deadlines, a bank, a battle clock, counters and statuses.

The guard holds a :class:`~center.evaluation.playing.side.Side` (in-process or on an edge) and asks
it for each decision in one call under its :class:`~center.evaluation.playing.budget.Budget`: free
time per decision, a bank of overage (with its grace and its increment per turn), a cap per call and
per turn, the battle clock, and credit for a call's wait for an edge's CPU
(:mod:`center.evaluation.playing.queue_credit`). What goes wrong is booked by the outcome table
(:meth:`SideGuard.book`), never an exception in the match loop. The rules: docs/running.md.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import gymnasium

from center.env.session_api import SideSeat
from center.errors import InfrastructureError, SideError
from center.evaluation.playing.budget import Budget, clock_failure
from center.evaluation.playing.queue_credit import credited_wait, queue_credit
from center.evaluation.playing.side import Side
from center.evaluation.playing.side_stats import SideStats
from edge.contract.decision import Decision, action_accepted, observation_accepted
from edge.contract.outcomes import (
    SIDE_STATUSES,
    Outcome,
    Seen,
    SideStatus,
    Void,
    outcome_of,
    voided,
)
from edge.contract.runner import UserFailure
from edge.wire.spaces import space_from_wire, space_to_wire

logger = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True)
class Move:
    """What the match sends for a decision: ``order`` (the side's order, to be checked against the
    request), or Showdown's default move (``order`` None). ``invalid``: why the action or its order
    is illegal; the match penalizes it, notes it and asks again."""

    order: str | None = None
    invalid: UserFailure | None = None


DEFAULT_MOVE = Move()


class SideGuard:
    """One side's decisions for one battle (see the module docstring)."""

    def __init__(
        self,
        side: Side,
        agent_full_name: str,
        budget: Budget,
        *,
        opened_s: float = 0.0,
        trusted: bool = True,
    ) -> None:
        self.side = side
        #: whether the side's edge is taken at its word (an outcome that voids for a lost edge
        #: voids only a trusted edge's battle)
        self.trusted = trusted
        #: the outcome (a row of the outcome table) that ended the side's battle, None while none has
        self.outcome: Outcome | None = None
        self.agent_full_name = agent_full_name
        self.budget = budget
        self.bank = budget.bank + budget.grace
        self.stats = SideStats()
        # Plain Gymnasium copies: checking a value never runs a user-defined Space method.
        self.observation_space = _canonical(side.observation_space)
        self.action_space = _canonical(side.action_space)
        self._used = 0.0  # seconds used by the decision in progress
        self._cpu: float | None = None  # CPU seconds of the decision in progress, when measured
        #: the battle is over: the clock no longer forfeits (its last calls only lose their wait)
        self._over = False
        #: the user call that last ran past its deadline ("" when none did)
        self._overran = ""
        #: the battle turn of the side's last decision (None before its first)
        self._turn: int | None = None
        #: the most the decision in progress may take (None: none in progress, or no cap)
        self._turn_cap: float | None = None
        self._deciding = False
        self._clock(opened_s, "opening the session")

    @property
    def fatal(self) -> SideStatus | None:
        return self.stats.fatal

    def voids(self, edge_loss: Literal["void", "forfeit"]) -> bool:
        """Whether the outcome that ended the side's battle voids it under ``edge_loss`` (the
        match then plays it again) rather than booking the side."""
        outcome = self.outcome
        return outcome is not None and voided(outcome, trusted=self.trusted, edge_loss=edge_loss)

    def output(self) -> str:
        """What the side's code printed during the battle (captured in-process or on its edge)."""
        return self.side.output()

    def close(self) -> None:
        """Release what the side holds in this process."""
        self.side.close()

    # -- the battle ------------------------------------------------------------------------------

    def reset(self, seed: int | None) -> None:
        """A new battle: the Agent seeded with ``seed``, the Agent and the Policy reset."""
        if self.fatal is not None:
            return
        try:
            self._call("reset", lambda t, q: self.side.reset(seed, timeout=t, queue_limit=q))
        except Exception as exc:
            self.book("reset", exc)
        self._used, self._cpu = 0.0, None

    @property
    def needs_battle(self) -> bool:
        """Whether the side reads its seat's poke-env Battle (its Agent runs in this process)."""
        return self.side.needs_battle

    def decide(self, seat: SideSeat, reward: float, info: dict[str, Any]) -> Decision | None:
        """The side's whole decision for ``seat``'s current request, in one call to the side. ``info`` is
        the policy step's (its mask aside: the Agent's). None when there is no choice to judge:
        the side failed, timed out or gave an observation outside its space (the default move is
        played). :meth:`judge` turns the decision into a move."""
        if self.fatal is not None:
            return None
        if not self._deciding:  # a new decision, not a request asked again
            self._new_decision(seat.view.turn if seat.view is not None else 0)
        try:
            decision = self._call(
                "makeObs",
                lambda t, q: self.side.decide(seat, reward, info, False, timeout=t, queue_limit=q),
            )
        except Exception as exc:
            self.book("makeObs", exc)
            return None
        if not self._observed(decision):  # the observation was refused
            self._invalid_observation()
            self.end_decision()
            return None
        return decision

    def _new_decision(self, turn: int) -> None:
        """A decision starts on battle turn ``turn``: at a new turn the bank gains the increment
        (never rising above the budget's bank: the grace is gone then), and the decision gets its
        cap, the first decision's or any other's (Showdown's timer, server/room-battle.ts)."""
        first = self._turn is None
        if self._turn is not None and turn > self._turn:
            self.bank = min(self.bank + self.budget.increment, self.budget.bank)
        self._turn = turn
        self._turn_cap = self.budget.turn_cap(first)
        self._deciding = True

    def judge(self, decision: Decision | None, *, team_preview: bool) -> Move:
        """The move of a decision: what its step and deploy raised, and its action, judged. The
        match judges the decisions of a round once every side that had to act has decided, so
        that a side that failed to observe forfeits before any side's choice counts."""
        if decision is None or self.fatal is not None:
            return DEFAULT_MOVE
        self.stats.decisions += 1
        if decision.step_error is not None:
            self.book("policy.step", decision.step_error)
            return DEFAULT_MOVE
        failed = decision.deploy_error
        if failed is not None and not isinstance(failed, ValueError):
            # deploy failed: the side forfeits before any order is sent (a default move sent now
            # could end the battle in the failed side's favour)
            self.book("deploy", failed)
            return DEFAULT_MOVE
        accepted = action_accepted(self.action_space, decision.action, team_preview=team_preview)
        if not accepted or (decision.order is None and failed is None):
            # the decision goes on: the request is asked again
            return Move(invalid=_OUTSIDE_ACTION_SPACE)
        if failed is not None:  # ValueError, InvalidActionError included: an illegal action
            return Move(invalid=UserFailure.of(failed, "deploy"))
        # The decision ends (its time charged to the bank) when its order is sent: after every
        # side's failure of the round has been judged, as when deploy was its own call.
        return Move(decision.order)

    def invalid(self, why: UserFailure) -> None:
        """The match refused the side's action or order (``why``): counted as INVALID."""
        self.stats.note(SideStatus.INVALID, why)

    def finish(self, seat: SideSeat, reward: float, info: dict[str, Any]) -> None:
        """The battle is over: the policy's last step (``done``) with the last observation, then
        the Agent's ``onEpisodeEnd``. Failures are only logged."""
        self._over = True
        self._deciding, self._turn_cap = False, None  # the last calls have no turn's cap
        if self.fatal is not None:
            return
        try:
            decision = self._call(
                "makeObs",
                lambda t, q: self.side.decide(seat, reward, info, True, timeout=t, queue_limit=q),
            )
        except Exception as exc:  # the last observation failed as any other would
            self.book("makeObs", exc)
        else:
            if not self._observed(decision):
                self._invalid_observation()
            elif decision.step_error is not None:
                logger.info(
                    "%s: final policy.step failed: %r", self.agent_full_name, decision.step_error
                )
        if self.fatal is None:
            try:
                self._call(
                    "onEpisodeEnd",
                    lambda t, q: self.side.episode_end(seat, timeout=t, queue_limit=q),
                )
            except Exception as exc:
                logger.info("%s: onEpisodeEnd failed: %r", self.agent_full_name, exc)
        self._used, self._cpu = 0.0, None

    def _observed(self, decision: Decision) -> bool:
        """Whether the decision's observation is in the side's space, checked here against the
        rebuilt built-in space: the side's own check (``stepped``) ran the user's Space class, on
        an edge in code the center does not trust."""
        return decision.stepped and observation_accepted(
            self.observation_space, decision.observation
        )

    def _invalid_observation(self) -> None:
        self.stats.invalid += 1
        self.stats.note(
            SideStatus.INVALID,
            UserFailure("InvalidObservation", "makeObs returned a value outside observation_space"),
        )

    def fail(self, cause: str, detail: str, failure: UserFailure | None = None) -> None:
        """Mark the side as failed by ``cause`` (a key of the outcome table: the battle is
        forfeited for it with its row's status); the first failure is the one kept."""
        outcome = outcome_of(cause)
        status = outcome.status
        if self.stats.fatal is None:
            self.outcome = outcome
            self.stats.fatal = status
            self.stats.detail = detail[:2000]
            self.stats.failure = failure or UserFailure(SIDE_STATUSES[status].failure_type, detail)
            logger.info("%s: %s (%s)", self.agent_full_name, status.value, detail[:200])
        self.stats.note(status)

    # -- calls under the budget -----------------------------------------------------------------

    def _deadline(self) -> float:
        free = max(self.budget.decision_time - self._used, 0.0)
        deadline = free + max(min(self.bank, self.budget.call_cap), 0.0)
        if self._turn_cap is not None:  # what is left of the decision's cap
            deadline = min(deadline, max(self._turn_cap - self._used, 0.0))
        return deadline

    def _clock(self, seconds: float, what: str) -> None:
        """Charge ``seconds`` of ``what`` to the clock; run out, the side forfeits (unless the
        battle is over: its last step and onEpisodeEnd only lose their wait)."""
        self.stats.time_s += seconds
        if self.stats.time_s >= self.budget.battle_time and not self._over:
            spent = f"{self.stats.time_s:.1f}s in the side's calls"
            failure = clock_failure(spent, self.budget, what)
            self.fail(Seen.CLOCK, failure.line(), failure)

    def _call(self, what: str, fn: Callable[[float, float], T]) -> T:
        """``fn(timeout, queue_limit)`` under the budget; raise what the side raised after counting
        (a SideError of an outcome that does not end the battle is noted here: a timeout)."""
        left = self.budget.battle_time - self.stats.time_s
        if left <= 0:  # only the calls after the battle's end get here (else the side forfeited)
            raise SideError(Seen.OVERRAN, f"{what}: the battle clock is used up", call=what)
        timeout = min(self._deadline(), left)
        if timeout <= 0:  # a request asked again after the decision used up its turn's cap
            used_up = f"the turn's {self._turn_cap or 0.0:g}s are used up"
            error = SideError(Seen.OVERRAN, f"{what}: {used_up}", call=what)
            self._noted(error, UserFailure("CallTimeout", used_up, where=what))
            raise error
        credit = 0.0
        if self.side.queues:  # only an edge queues calls
            credit = queue_credit(
                self.budget.queue_credit_per_call, self.budget.bank, self.stats.queued_s
            )
        start = time.perf_counter()
        try:
            return fn(timeout, credit)
        except SideError as exc:
            if not exc.outcome.ends_battle:
                # It names the user call that overran when the side said (policy.step, say).
                where = self._overran = exc.call or what
                failure = exc.failure or UserFailure("CallTimeout", str(exc))
                self._noted(exc, dataclasses.replace(failure, where=where))
            raise
        finally:
            elapsed = time.perf_counter() - start
            usage = self.side.last_usage
            credited = credited_wait(elapsed, timeout, credit, usage)
            self.stats.queued_s += credited
            self._used += elapsed - credited
            if usage is not None:
                self._cpu = (self._cpu or 0.0) + usage.cpu
                self.stats.endpoint_requests += usage.endpoint_requests
                self.stats.endpoint_bytes += usage.endpoint_bytes
                self.stats.endpoint_tokens += usage.endpoint_tokens
            # The whole wait, queueing included: the organizer's time is spent all the same.
            self._clock(elapsed, self._overran or what)

    def _noted(self, error: SideError, failure: UserFailure) -> None:
        """Note an outcome that does not end the battle (its status, counted)."""
        status = error.outcome.status
        if status is SideStatus.TIMEOUT:
            self.stats.timeouts += 1
        self.stats.note(status, failure)

    def book(self, what: str, exc: BaseException) -> None:
        """The side's reaction to a failure of ``what``, from its row of the outcome table (an
        exception that is no SideError is the side's code raising, :attr:`Seen.RAISED`): the
        battle voided (InfrastructureError), forfeited with the row's status, or, for an outcome
        noted when the call was made (a timeout), the decision's default move played."""
        if isinstance(exc, InfrastructureError):  # the center's own failure, raised in the call
            raise exc
        error = (
            exc
            if isinstance(exc, SideError)
            else SideError(Seen.RAISED, str(exc), failure=UserFailure.of(exc, what))
        )
        outcome = error.outcome
        if outcome.void is Void.ALWAYS:  # the organizer's failure: no side is booked
            raise InfrastructureError(f"{what}: {error}") from exc
        if not outcome.ends_battle:
            self.end_decision()  # the default move is played
            return
        failure = error.failure
        if failure is not None and not failure.where:
            failure = dataclasses.replace(failure, where=what)
        detail = f"{what}: {failure.line() if failure is not None else error}"
        self.fail(error.cause, detail, failure)

    def end_decision(self) -> None:
        """The match sends the side's move (its order, or the default move played without asking
        it after too many illegal actions in a row): the decision in progress ends there, its
        time over the free allowance charged to the bank."""
        self._deciding, self._turn_cap = False, None
        if self._used <= 0.0:
            return
        self.stats.decision_ms.append(self._used * 1e3)
        if self._cpu is not None:
            self.stats.decision_cpu_ms.append(self._cpu * 1e3)
        self._cpu = None
        over = self._used - self.budget.decision_time
        if over > 0:
            self.bank -= over
            if self.bank <= 0:
                self.fail(
                    Seen.CLOCK,
                    f"time bank of {self.budget.bank:.1f}s exhausted",
                    UserFailure(
                        "TimeBankExhausted",
                        f"{self.budget.bank:.1f}s bank used up",
                        where=self._overran,
                    ),
                )
        self._used = 0.0
        self._overran = ""


_OUTSIDE_ACTION_SPACE = UserFailure(
    "InvalidAction", "policy.step returned an action outside action_space"
)


def _canonical(space: gymnasium.Space[Any]) -> gymnasium.Space[Any]:
    """The same space rebuilt from its wire description (built-in Gymnasium classes only)."""
    return space_from_wire(space_to_wire(space))
