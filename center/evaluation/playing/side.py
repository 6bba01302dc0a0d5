"""A side: something that decides. One call per decision, in-process or on an edge.

:class:`Side` is what the match's :class:`~center.evaluation.playing.side_guard.SideGuard` holds:
given its battle and the reward and info its policy's step gets, a side returns the whole decision
(:class:`edge.contract.decision.Decision`: observation, mask, action, order, or what the step or
deploy raised, as data) in one call under the deadline it is given. :class:`InProcessSide` runs the
user's Agent and Policy on a worker thread of this process (``sep_eval``);
``center.isolation.edge_session.RemoteSide`` sends one ``decide`` request to an edge (``sep_main``).
"""

from __future__ import annotations

import time
from typing import Any, Protocol

import gymnasium
from poke_env.battle import AbstractBattle

from center.env.session_api import SideSeat
from center.errors import CenterError, SideError
from edge.contract.agent import Agent
from edge.contract.decision import Decision, decide
from edge.contract.outcomes import Seen
from edge.contract.policy import StandalonePolicy
from edge.contract.runner import UserCodeRunner
from edge.errors import UserCallTimeout
from edge.wire.messages import CallUsage

__all__ = ["OUTPUT_PER_BATTLE", "InProcessSide", "Side"]

#: What an in-process side's code may print per battle before the rest is dropped (counted).
OUTPUT_PER_BATTLE = 65536


class Side(Protocol):
    """One candidate's side of one battle.

    Every call takes the seconds it may last (``timeout``) and, for a side whose calls queue for
    a CPU (``queues``: an edge's), the seconds it may wait for one on top (``queue_limit``). A
    call that fails raises :class:`~center.errors.SideError` with its cause (past its deadline:
    ``Seen.OVERRAN``; an edge's error reply: its code; a lost edge: ``Seen.LOST``); user code run
    here that raised outside the step and deploy, what it raised. ``last_usage`` says what the
    last call cost where it ran (None when unknown: a call that timed out).
    """

    observation_space: gymnasium.Space[Any]
    action_space: gymnasium.Space[Any]

    @property
    def needs_battle(self) -> bool:
        """Whether the side reads its seat's poke-env Battle (an Agent in this process); a side
        that does not gets the seat's frames only."""
        ...

    @property
    def queues(self) -> bool:
        """Whether a call may wait for a free CPU before it runs (an edge's)."""
        ...

    @property
    def last_usage(self) -> CallUsage | None: ...

    def decide(
        self,
        seat: SideSeat,
        reward: float,
        info: dict[str, Any],
        done: bool,
        *,
        timeout: float,
        queue_limit: float,
    ) -> Decision:
        """The decision on ``seat``'s battle (:func:`edge.contract.decision.decide`); ``done``: the
        battle is over, the policy's last step. ``info["action_mask"]`` is None while the battle
        goes on: the mask is the Agent's."""
        ...

    def reset(self, seed: int | None, *, timeout: float, queue_limit: float) -> None:
        """A new battle: seed the Agent with ``seed``, reset the Agent and the Policy."""
        ...

    def episode_end(self, seat: SideSeat, *, timeout: float, queue_limit: float) -> None:
        """The battle is over: the Agent's ``onEpisodeEnd``."""
        ...

    def output(self) -> str:
        """What the side's code printed during the battle (capped)."""
        ...

    def close(self) -> None:
        """Release what the side holds in this process."""
        ...


class InProcessSide:
    """The user's Agent and Policy in this process, on a worker thread under the deadline. The
    CPU time measured is that thread's (``thread_time``: not other threads or processes it
    starts)."""

    queues = False
    needs_battle = True

    def __init__(self, agent: Agent, policy: StandalonePolicy, agent_full_name: str) -> None:
        self.agent, self.policy, self.agent_full_name = agent, policy, agent_full_name
        self.observation_space = agent.observation_space
        self.action_space = agent.action_space
        self.last_usage: CallUsage | None = None
        self._runner = UserCodeRunner(OUTPUT_PER_BATTLE, "user-code")

    def _run(self, first: str, fn: Any, timeout: float) -> Any:
        """``fn(on_call)`` on the user-code thread; a timeout names the user call that overran
        (``first`` when ``fn`` named none)."""
        self.last_usage = None
        phase = [first]  # this call's own list: an abandoned call cannot write over another's
        cpu: list[float] = []

        def measured() -> Any:
            begin = time.thread_time()
            try:
                return fn(phase.append)
            except (SystemExit, KeyboardInterrupt) as exc:
                # Raised by user code on its own thread (the organizer's Ctrl-C reaches the main
                # thread, never this one): an error of the side's, not an exit of the center.
                raise RuntimeError(f"user code raised {type(exc).__name__}({exc})") from exc
            finally:
                cpu.append(time.thread_time() - begin)

        try:
            result = self._runner.call(measured, timeout)
        except UserCallTimeout as exc:
            raise SideError(Seen.OVERRAN, str(exc), call=phase[-1]) from None
        self.last_usage = CallUsage(cpu=sum(cpu), queued=0.0)
        return result

    def decide(
        self,
        seat: SideSeat,
        reward: float,
        info: dict[str, Any],
        done: bool,
        *,
        timeout: float,
        queue_limit: float = 0.0,
    ) -> Decision:
        agent, policy, name = self.agent, self.policy, self.agent_full_name
        battle = _battle(seat)
        decision: Decision = self._run(
            "makeObs",
            lambda note: decide(agent, policy, battle, reward, info, name, done=done, on_call=note),
            timeout,
        )
        return decision

    def reset(self, seed: int | None, *, timeout: float, queue_limit: float = 0.0) -> None:
        def reset(note: Any) -> None:
            self.agent.seed(seed)
            note("reset")
            self.agent.reset()
            note("policy.reset")
            self.policy.reset()

        self._run("seed", reset, timeout)

    def episode_end(self, seat: SideSeat, *, timeout: float, queue_limit: float = 0.0) -> None:
        battle = _battle(seat)
        self._run("onEpisodeEnd", lambda note: self.agent.onEpisodeEnd(battle), timeout)

    def output(self) -> str:
        return self._runner.output()

    def close(self) -> None:
        self._runner.close()


def _battle(seat: SideSeat) -> AbstractBattle:
    """The seat's poke-env Battle, which the session keeps for a side that ``needs_battle``."""
    if seat.battle is None:
        raise CenterError("the session kept no Battle for an in-process side's seat")
    return seat.battle
