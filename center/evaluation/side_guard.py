"""SideGuard: one side's Agent and Policy behind deadlines, counters and statuses.

Every call into a side's code (``makeObs``, ``policy.step``, ``deploy``), in-process or on an edge,
runs under a budget in the manner of Kaggle environments and Lux AI:

- a *decision* (the user calls between two orders) may take ``decision_time`` seconds for free;
- beyond that, time is drawn from the side's ``bank`` of overage;
- one call waits at most ``decision_time`` left + ``min(bank, call_cap)``. A call that does not
  answer by then is a **timeout**: the side plays Showdown's default move, and the time waited is
  charged to the bank. A bank that runs dry forfeits the battle (status TIMEOUT).
- on an edge, a call may first wait for a free CPU (``sep_edge --cpus``): the guard credits that
  wait (the reply's ``usage.queued``, protocol 1.4) and waits that much longer, but never more
  than ``decision_time`` per call nor more than ``bank`` over a battle (see
  :mod:`center.evaluation.queue_credit`), so that an edge cannot buy its side time by claiming
  it waited.
- a *battle clock* (``battle_time``): the wall time of all the side's calls in a battle, its open
  included (``opened_s``). No call waits past what is left; running out forfeits (TIMEOUT).

Each decision's CPU time is recorded too: on an edge, the ``usage.cpu`` of its calls (every process
of the worker); in-process, the CPU time of the thread that runs the side's code (``thread_time``:
not other threads or processes it starts).

What goes wrong becomes a status, never an exception in the match loop: an exception in user code
forfeits the battle (ERROR); a lost edge forfeits it (DISCONNECT); an illegal action or observation
is counted (INVALID) and the environment penalizes it and asks again, up to a bound, then plays the
default move. The guard's ``agent`` has exactly the Agent interface, so PokemonEnv cannot tell.

A decision is one guarded call, in-process as on an edge: before ``makeObs`` the environment tells
the agent the reward and info the policy's step will get (``expect_step``), so the call that runs
``makeObs`` and ``action_mask`` also runs ``policy.step`` and ``deploy`` with the arguments the
match loop is going to pass (the mask as the environment will show it). The step and the deploy that
follow use those answers when their arguments are the expected ones, and are ordinary calls
otherwise. So the three calls of a decision share one deadline, as they do through an edge's
``decide_request``, and an in-process side costs one thread hand-off per decision instead of three.
What the step or deploy raised is raised again when its answer is used, as the call would have.
At the end of a battle the environment tells the agent the policy's last step (``done``): the call
that runs the last ``makeObs`` runs that step too, before ``onEpisodeEnd``, as on an edge.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, runtime_checkable

import gymnasium
import numpy as np
from poke_env.battle import AbstractBattle

from center.env.cooperation import ExpectsStep
from center.errors import CallTimeout, SideDisconnected
from center.evaluation.budget import Budget, clock_failure
from center.evaluation.queue_credit import credited_wait, queue_credit
from center.evaluation.records import SIDE_STATUSES, SideStatus
from center.evaluation.side_stats import SideStats
from center.isolation.delegator import same_action, same_info
from edge.contract.agent import Agent, Order
from edge.contract.decision import action_accepted, decide, observation_accepted, order_text
from edge.contract.policy import StandalonePolicy
from edge.contract.runner import UserCodeRunner, UserFailure
from edge.errors import InvalidActionError, UserCallTimeout
from edge.maple.orders import default_order
from edge.wire.messages import CallUsage, policy_mask
from edge.wire.spaces import space_from_wire, space_to_wire

logger = logging.getLogger(__name__)

T = TypeVar("T")

#: The action a guard hands the environment when the side must play Showdown's default move.
DEFAULT_ACTION = "__default__"
#: The action a guard hands the environment for an action outside the side's action space.
INVALID_ACTION = "__invalid__"

#: What an in-process side's code may print per battle before the rest is dropped (counted).
OUTPUT_PER_BATTLE = 65536


@runtime_checkable
class SupportsDeadline(Protocol):
    """A remote stand-in (delegator) that bounds its own calls by ``call_timeout`` seconds, lets
    them wait up to ``queue_limit`` more seconds for a free CPU on its edge, and says what its last
    call cost there (``last_usage``: None when the edge did not say)."""

    call_timeout: float
    queue_limit: float
    last_usage: CallUsage | None


@dataclass
class _Decided:
    """A decision taken in the ``makeObs`` call: the step's arguments, then its answers (or what
    it raised), and the battle the order was deployed on (on the request of that battle: frames
    that arrived since cannot change it, a new request comes only after the order)."""

    observation: Any
    reward: float
    info: dict[str, Any]
    battle: int
    done: bool = False
    action: Any = None
    step_error: BaseException | None = None
    order: str | None = None
    deploy_error: BaseException | None = None


class SideGuard:
    """Wraps one side's Agent and Policy for one battle (see the module docstring)."""

    def __init__(
        self,
        agent: Agent,
        policy: StandalonePolicy,
        agent_full_name: str,
        budget: Budget,
        *,
        in_process: bool,
        classify: Callable[[BaseException], SideStatus] | None = None,
        opened_s: float = 0.0,
    ) -> None:
        self.inner_agent = agent
        self.policy = policy
        self.agent_full_name = agent_full_name
        self.budget = budget
        self.bank = budget.bank
        self.stats = SideStats()
        # In-process sides run on a worker thread under the deadline, and what they print is kept
        # for the battle (capped), as an edge keeps it.
        self._runner = UserCodeRunner(OUTPUT_PER_BATTLE, "user-code") if in_process else None
        self._deadline_targets = [
            t for t in (agent, policy) if not in_process and isinstance(t, SupportsDeadline)
        ]
        self._classify = classify or (lambda exc: SideStatus.ERROR)
        self._used = 0.0  # seconds used by the decision in progress
        self._cpu: float | None = None  # CPU seconds of the decision in progress, when measured
        #: what the side's code printed during the battle (captured in-process, or on its edge)
        self.output: Callable[[], str] = self._runner.output if self._runner else lambda: ""
        self._must_default = False
        #: the reward, info and done of the next policy step, told by the environment
        #: (in-process)
        self._expected: tuple[float, dict[str, Any], bool] | None = None
        #: the decision the last makeObs call took, until act uses it
        self._decided: _Decided | None = None
        #: the decision whose order deploy may use, once act used its action
        self._deployed: _Decided | None = None
        #: the user calls the decision in progress started, in order (see _call)
        self._phase: list[str] | None = None
        #: the environment asked for the policy's last step with the last makeObs
        self._final_asked = False
        #: the user call that last ran past its deadline ("" when none did)
        self._overran = ""
        self.agent = _GuardedAgent(self)
        self._clock(opened_s, "opening the session")

    # -- calls under the budget -----------------------------------------------------------------

    def _deadline(self) -> float:
        free = max(self.budget.decision_time - self._used, 0.0)
        return free + max(min(self.bank, self.budget.call_cap), 0.0)

    def _clock(self, seconds: float, what: str) -> None:
        """Charge ``seconds`` of ``what`` to the clock; run out, the side forfeits (unless the
        battle is over: its last step and onEpisodeEnd only lose their wait)."""
        self.stats.time_s += seconds
        if self.stats.time_s >= self.budget.battle_time and not self._final_asked:
            spent = f"{self.stats.time_s:.1f}s in the side's calls"
            failure = clock_failure(spent, self.budget, what)
            self._fail(SideStatus.TIMEOUT, failure.line(), failure)

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        """Run ``fn`` under the budget; raise CallTimeout / the user's exception after counting."""
        left = self.budget.battle_time - self.stats.time_s
        if left <= 0:  # only the calls after the battle's end get here (else the side forfeited)
            raise CallTimeout(f"{what}: the battle clock is used up", what)
        timeout = min(self._deadline(), left)
        credit = 0.0
        if self._deadline_targets:  # only an edge queues calls
            credit = queue_credit(self.budget.decision_time, self.budget.bank, self.stats.queued_s)
        thread_cpu: list[float] = []
        self._phase = None  # a decision in this call names its user calls here (see _decide)
        start = time.perf_counter()
        try:
            if self._runner is not None:

                def measured() -> T:
                    begin = time.thread_time()  # the user-code thread's own CPU time
                    try:
                        return fn()
                    finally:
                        thread_cpu.append(time.thread_time() - begin)

                try:
                    return self._runner.call(measured, timeout)
                except UserCallTimeout as exc:
                    phase = self._phase
                    raise CallTimeout(str(exc), phase[-1] if phase else "") from None
            for target in self._deadline_targets:
                target.call_timeout = timeout
                target.queue_limit = credit
                target.last_usage = None  # a call answered without a round trip costs nothing
            return fn()
        except CallTimeout as exc:
            # Only our own deadline (the runner's, or a delegator's mapped EdgeTimeout) is a
            # timeout: a TimeoutError raised by user code is an error, as it is on an edge. It
            # names the user call that overran when the decision said (policy.step, say).
            where = self._overran = exc.call or what
            self.stats.timeouts += 1
            self.stats.note(SideStatus.TIMEOUT, UserFailure("CallTimeout", str(exc), where=where))
            raise CallTimeout(f"{where}: {exc}", where) from exc
        finally:
            elapsed = time.perf_counter() - start
            reports = (t.last_usage for t in self._deadline_targets if t.last_usage is not None)
            usage = next(reports, None)
            credited = credited_wait(elapsed, timeout, credit, usage)
            self.stats.queued_s += credited
            self._used += elapsed - credited
            cpu = usage.cpu if usage is not None else sum(thread_cpu) if thread_cpu else None
            if cpu is not None:
                self._cpu = (self._cpu or 0.0) + cpu
            if usage is not None:
                self.stats.endpoint_requests += usage.endpoint_requests
                self.stats.endpoint_bytes += usage.endpoint_bytes
                self.stats.endpoint_tokens += usage.endpoint_tokens
            # The whole wait, queueing included: the organizer's time is spent all the same.
            self._clock(elapsed, self._overran or what)

    def fail(self, status: SideStatus, detail: str, failure: UserFailure | None = None) -> None:
        """Mark the side as failed (the battle is forfeited for it)."""
        self._fail(status, detail, failure)

    def _fail(self, status: SideStatus, detail: str, failure: UserFailure | None = None) -> None:
        if self.stats.fatal is None:
            self.stats.fatal = status
            self.stats.detail = detail[:2000]
            self.stats.failure = failure or UserFailure(SIDE_STATUSES[status].failure_type, detail)
            logger.info("%s: %s (%s)", self.agent_full_name, status.value, detail[:200])
        self.stats.note(status)

    def _handle(self, what: str, exc: BaseException) -> None:
        """Turn an exception from a call into the side's status."""
        if isinstance(exc, SideDisconnected):
            self._fail(SideStatus.DISCONNECT, f"{what}: {exc}")
        elif isinstance(exc, CallTimeout):
            self._must_default = True
            self._end_decision()
        else:
            failure = _failure_of(exc, what)
            self._fail(self._classify(exc), f"{what}: {failure.line()}", failure)

    def _end_decision(self) -> None:
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
                self._fail(
                    SideStatus.TIMEOUT,
                    f"time bank of {self.budget.bank:.1f}s exhausted",
                    UserFailure(
                        "TimeBankExhausted",
                        f"{self.budget.bank:.1f}s bank used up",
                        where=self._overran,
                    ),
                )
        self._used = 0.0
        self._overran = ""

    def close(self) -> None:
        """Release the side's worker thread (in-process sides)."""
        if self._runner is not None:
            self._runner.close()

    @property
    def fatal(self) -> SideStatus | None:
        return self.stats.fatal

    # -- the policy, called by the match loop ---------------------------------------------------

    def act(self, observation: Any, reward: float, done: bool, info: dict[str, Any]) -> Any:
        """The side's action for a decision, or DEFAULT_ACTION / INVALID_ACTION."""
        if self.fatal is not None or self._must_default:
            return DEFAULT_ACTION
        self.stats.decisions += 1
        space = self.inner_agent.action_space
        decided, self._decided = self._decided, None
        if decided is not None and not (
            not decided.done
            and observation is decided.observation
            and float(reward) == decided.reward
            and same_info(info, decided.info)
        ):
            logger.debug(
                "%s: the step taken with makeObs had other arguments", self.agent_full_name
            )
            decided = None
        try:
            if decided is not None:
                if decided.step_error is not None:
                    raise decided.step_error
                action = decided.action
                failed = decided.deploy_error
                if failed is not None and not isinstance(failed, (ValueError, CallTimeout)):
                    # deploy failed in the decision: the side forfeits before any order is sent
                    # (a default move sent now could end the battle in the failed side's favour)
                    self._handle("deploy", failed)
                    return DEFAULT_ACTION
                self._deployed = decided
            else:
                action = self._call(
                    "policy.step",
                    lambda: self.policy.step(
                        observation,
                        reward,
                        done,
                        info,
                        self.agent_full_name,
                        self.inner_agent.observation_space,
                        space,
                    ),
                )
        except Exception as exc:
            self._handle("policy.step", exc)
            return DEFAULT_ACTION
        if not action_accepted(space, action, team_preview=bool(info.get("team_preview"))):
            return INVALID_ACTION  # the environment penalizes it and counts it
        return action

    def finish(self, observation: Any, reward: float, info: dict[str, Any]) -> None:
        """Tell the policy the episode is over (its answer is ignored; failures are only logged)."""
        if self.fatal is not None:
            return
        decided, self._decided = self._decided, None
        if self._final_asked:
            # Taken with the last makeObs, in the same guarded call, or not at all: that call
            # failed, or the observation was refused. Never a second time, after onEpisodeEnd.
            if decided is not None and decided.step_error is not None:
                logger.info(
                    "%s: final policy.step failed: %r", self.agent_full_name, decided.step_error
                )
            self._used, self._cpu = 0.0, None
            return
        try:
            self._call(
                "policy.step(done)",
                lambda: self.policy.step(
                    observation,
                    reward,
                    True,
                    info,
                    self.agent_full_name,
                    self.inner_agent.observation_space,
                    self.inner_agent.action_space,
                ),
            )
        except Exception as exc:
            logger.info("%s: final policy.step failed: %r", self.agent_full_name, exc)
        self._used, self._cpu = 0.0, None


class _GuardedAgent(Agent):
    """The Agent PokemonEnv sees: the side's Agent behind the guard."""

    def __init__(self, guard: SideGuard) -> None:
        super().__init__({}, {})
        self.guard = guard
        # Plain Gymnasium copies: checking a value never runs a user-defined Space method.
        self.observation_space = _canonical(guard.inner_agent.observation_space)
        self.action_space = _canonical(guard.inner_agent.action_space)
        self._mask: tuple[int, Any] | None = None  # (id(battle), mask) from the last makeObs

    def _safe_observation(self) -> Any:
        space = self.observation_space
        if isinstance(space, gymnasium.spaces.Box):
            return np.clip(np.zeros(space.shape, dtype=space.dtype), space.low, space.high)
        return space.sample()

    def makeObs(self, battle: AbstractBattle) -> Any:
        guard = self.guard
        guard._must_default = False  # a new observation: an earlier timeout decides nothing here
        # A new observation starts a new decision: nothing taken for an earlier one is reused.
        expected, guard._expected = guard._expected, None
        guard._decided = guard._deployed = None
        if guard.fatal is not None:
            return self._safe_observation()
        inner = guard.inner_agent
        self._mask = None
        decided: _Decided | None = None
        try:
            # One guarded call for both: the environment always asks for the mask right after;
            # with the whole decision when the environment said what the step will get.
            if expected is not None:
                reward, info, done = expected
                observation, mask, decided = guard._call(
                    "makeObs", lambda: self._decide(battle, reward, info, done)
                )
            else:
                observation, mask = guard._call(
                    "makeObs", lambda: (inner.makeObs(battle), inner.action_mask(battle))
                )
        except Exception as exc:
            guard._handle("makeObs", exc)
            return self._safe_observation()
        self._mask = (id(battle), mask)
        if decided is None and not observation_accepted(self.observation_space, observation):
            guard.stats.invalid += 1
            guard.stats.note(
                SideStatus.INVALID,
                UserFailure(
                    "InvalidObservation", "makeObs returned a value outside observation_space"
                ),
            )
            guard._must_default = True
            return self._safe_observation()
        guard._decided = decided
        return observation

    def _decide(
        self, battle: AbstractBattle, reward: float, info: dict[str, Any], done: bool
    ) -> tuple[Any, Any, _Decided | None]:
        """The decision as the match loop will take it (:func:`edge.contract.decision.decide`, as
        an edge's worker and the checker run it), on the user-code thread under the makeObs
        call's deadline. No decision when the observation is refused: the loop will not step."""
        guard, inner = self.guard, self.guard.inner_agent
        phase = guard._phase = []  # this call's own list: an abandoned call cannot write over
        decision = decide(
            inner,
            guard.policy,
            battle,
            reward,
            info,
            guard.agent_full_name,
            done=done,
            on_call=phase.append,
        )
        if not decision.stepped:
            return decision.observation, decision.mask, None
        if not done:
            info = {**info, "action_mask": policy_mask(decision.mask, self.action_space)}
        decided = _Decided(decision.observation, reward, info, id(battle), done)
        decided.action = decision.action
        # Raised again if the loop takes this step, or the environment deploys this action.
        decided.step_error = decision.step_error
        decided.order = decision.order
        decided.deploy_error = decision.deploy_error
        return decision.observation, decision.mask, decided

    def expect_step(self, reward: float, info: dict[str, Any], done: bool = False) -> None:
        """The environment's cooperation: the next policy step, if the next makeObs leads to one,
        gets ``reward``, ``info`` (its mask aside, while the battle goes on) and ``done`` (the
        battle is over: the policy's last step). A remote Agent asks its edge for the whole
        decision in one round trip; in-process, the guard takes it in one call."""
        guard = self.guard
        if guard.fatal is not None:
            return
        guard._final_asked = guard._final_asked or done
        if isinstance(guard.inner_agent, ExpectsStep):
            guard.inner_agent.expect_step(reward, info, done)
        elif guard._runner is not None and (done or info.get("needs_action")):
            guard._expected = (reward, dict(info), done)

    def action_mask(self, battle: AbstractBattle) -> np.ndarray | None:
        guard = self.guard
        if guard.fatal is not None or guard._must_default:
            return None
        cached, self._mask = self._mask, None
        if cached is not None and cached[0] == id(battle):
            mask = cached[1]
        else:
            try:
                mask = guard._call("action_mask", lambda: guard.inner_agent.action_mask(battle))
            except Exception as exc:
                guard._handle("action_mask", exc)
                return None
        if mask is None:
            return None
        try:
            mask = np.asarray(mask)
            space = self.action_space
            if mask.dtype.kind not in "biu" or (
                isinstance(space, gymnasium.spaces.Discrete) and mask.shape != (int(space.n),)
            ):
                return None  # a malformed mask is ignored, not trusted
            return mask.astype(np.int8)
        except Exception:  # e.g. a ragged list: ignored as well
            return None

    def deploy(self, battle: AbstractBattle, action: Any) -> Order:
        guard = self.guard
        if isinstance(action, str) and action == INVALID_ACTION:
            guard.stats.note(
                SideStatus.INVALID,
                UserFailure("InvalidAction", "policy.step returned an action outside action_space"),
            )
            raise InvalidActionError("action outside the action space")
        if (isinstance(action, str) and action == DEFAULT_ACTION) or guard.fatal is not None:
            guard._must_default = False
            guard._end_decision()
            return default_order(battle)
        decided, guard._deployed = guard._deployed, None
        if decided is not None and not (
            decided.battle == id(battle) and same_action(decided.action, action)
        ):
            decided = None
        try:
            if decided is not None:  # deployed in the makeObs call, on this very battle state
                if decided.deploy_error is not None:
                    raise decided.deploy_error
                assert decided.order is not None
                order = decided.order
            else:
                # The order's text is read inside the guarded call: BattleOrder.message is user
                # code when deploy returns a subclass.
                order = guard._call(
                    "deploy", lambda: order_text(guard.inner_agent.deploy(battle, action))
                )
        except ValueError as exc:  # InvalidActionError included: the env penalizes and asks again
            guard.stats.note(SideStatus.INVALID, UserFailure.of(exc, "deploy"))
            raise InvalidActionError(str(exc)) from exc
        except Exception as exc:
            guard._handle("deploy", exc)
            guard._must_default = False
            return default_order(battle)
        guard._end_decision()
        return order  # the environment checks it against the request (see order_refused)

    def order_refused(self, reason: InvalidActionError) -> None:
        """The environment refused the order deploy returned: the reason is kept for the side."""
        self.guard.stats.note(SideStatus.INVALID, UserFailure.of(reason, "deploy"))

    def reset(self) -> None:
        guard = self.guard
        try:
            guard._call("reset", guard.inner_agent.reset)
            guard._call("policy.reset", guard.policy.reset)
        except Exception as exc:
            guard._handle("reset", exc)
        guard._used, guard._cpu = 0.0, None

    def seed(self, seed: int | None) -> None:
        guard = self.guard
        try:
            guard._call("seed", lambda: guard.inner_agent.seed(seed))
        except Exception as exc:
            guard._handle("seed", exc)

    def onEpisodeEnd(self, battle: AbstractBattle) -> None:
        guard = self.guard
        if guard.fatal is not None:
            return
        try:
            guard._call("onEpisodeEnd", lambda: guard.inner_agent.onEpisodeEnd(battle))
        except Exception as exc:
            logger.info("%s: onEpisodeEnd failed: %r", guard.agent_full_name, exc)


def _failure_of(exc: BaseException, what: str) -> UserFailure:
    """What user code raised in ``what``, as data (remote exceptions keep the edge's traceback)."""
    ename = getattr(exc, "ename", None)
    if isinstance(ename, str):  # raised on an edge: type, message and traceback came back as data
        evalue = str(getattr(exc, "evalue", ""))
        return UserFailure(ename, evalue, str(getattr(exc, "traceback", "")), what)
    return UserFailure.of(exc, what)


def _canonical(space: gymnasium.Space[Any]) -> gymnasium.Space[Any]:
    """The same space rebuilt from its wire description (built-in Gymnasium classes only)."""
    return space_from_wire(space_to_wire(space))
