"""The match loop drives the battle session's seats with the sides' whole decisions.

The battle session here is a fake (the seats, submit, and a round that ends the battle after a
given number of submitted rounds); the sides are fakes of the Side protocol with scripted
decisions; the guards, the rewards, the infos and the order check are the real ones.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import gymnasium
import numpy as np
import pytest

from center.env.rounds import RewardConfig, RoundEnd
from center.env.session_api import SeatState
from center.errors import EdgeDown
from center.evaluation.playing.battle_loop import drive_battle
from center.evaluation.playing.budget import Budget
from center.evaluation.playing.side_guard import SideGuard
from center.showdown.sim_seeds import RunSecret
from edge.contract.decision import Decision
from edge.contract.outcomes import EndReason, SideStatus
from edge.contract.showdown_request import ShowdownRequest, request_of
from tests.fixtures.synthetic_battle import Mon, build_battle

PLAYERS = ("player_0", "player_1")


class _Seat:
    def __init__(self) -> None:
        self.battle = build_battle([Mon("Pikachu", ("thunderbolt", "quickattack"))], [Mon("Eevee")])
        self.view = self.battle
        self.state = SeatState.NEEDS_ACTION

    @property
    def request(self) -> ShowdownRequest | None:
        return request_of(self.battle)


class _Session:
    def __init__(self) -> None:
        self.seats = {p: _Seat() for p in PLAYERS}
        self.sent: list[tuple[str, str]] = []
        self.kept: list[str] | None = None

    def keep_battles(self, names: list[str]) -> None:
        self.kept = list(names)

    def drain(self) -> None:
        pass

    def submit(self, name: str, message: str) -> None:
        assert self.seats[name].state is SeatState.NEEDS_ACTION
        self.seats[name].state = SeatState.SUBMITTED
        self.sent.append((name, message))


class _Env:
    """What the loop uses of PokemonEnv: its session, and a battle won by blue after ``rounds``
    rounds in which both seats submitted."""

    rewards = RewardConfig()
    run_secret = RunSecret.random()

    def __init__(self, rounds: int) -> None:
        self.session = _Session()
        self.rounds_left = rounds
        self.over = False
        self.end_reason: EndReason | None = None
        self.forfeited: str | None = None

    def start_battle(self, seed: int) -> None:
        pass

    def battle(self, name: str) -> Any:
        return self.session.seats[name].battle

    def end_round(self) -> RoundEnd | None:
        seats = self.session.seats.values()
        if any(seat.state is SeatState.NEEDS_ACTION for seat in seats):
            return None
        self.rounds_left -= 1
        for seat in seats:
            seat.state = SeatState.NEEDS_ACTION
        if self.rounds_left:
            return None
        self.over, self.end_reason = True, EndReason.WIN
        return RoundEnd(EndReason.WIN, {"player_0": 1.0, "player_1": -1.0}, True)

    def forfeit(self, name: str, reason: EndReason) -> None:
        self.over, self.end_reason, self.forfeited = True, reason, name


class _Side:
    """A side whose decisions are scripted: an order, or an exception for the call (makeObs
    raised) or for the step (``step_error``)."""

    queues = False
    needs_battle = False
    last_usage = None

    def __init__(self, orders: list[Any]) -> None:
        self.observation_space = gymnasium.spaces.Box(0.0, 1.0, (1,), np.float32)
        self.action_space = gymnasium.spaces.Discrete(2)
        self.orders = orders
        self.asked: list[tuple[float, dict[str, Any], bool]] = []

    def decide(self, battle, reward, info, done, *, timeout, queue_limit) -> Decision:
        self.asked.append((reward, dict(info), done))
        observation = np.zeros(1, np.float32)
        if done:
            return Decision(observation, None, stepped=True, action=0)
        order = self.orders.pop(0) if self.orders else "/choose move 1"
        if isinstance(order, Exception) and str(order) == "makeObs":
            raise order
        if isinstance(order, Exception):
            return Decision(observation, None, stepped=True, step_error=order)
        return Decision(observation, None, stepped=True, action=0, order=order)

    def reset(self, seed, *, timeout, queue_limit) -> None:
        pass

    def episode_end(self, battle, *, timeout, queue_limit) -> None:
        pass

    def output(self) -> str:
        return ""

    def close(self) -> None:
        pass


def _guards(blue: _Side, red: _Side) -> dict[str, SideGuard]:
    return {
        p: SideGuard(s, f"{p}:m:p", Budget()) for p, s in zip(PLAYERS, (blue, red), strict=True)
    }


def test_an_illegal_order_is_penalized_and_asked_again_then_the_default_move_is_played():
    illegal = "/choose move 9"
    blue, red = _Side([illegal] * 3), _Side([])
    env = _Env(rounds=3)
    sides = _guards(blue, red)
    forfeited, invalid = drive_battle(env, 1, sides, Budget())  # type: ignore[arg-type]
    assert forfeited is None and invalid == {"player_0": 3, "player_1": 0}
    # Asked three times in the first round, each time with the penalty and the flag of the illegal
    # order before; the fourth time the default move is played without asking the side.
    rewards = [round(r, 6) for r, _, done in blue.asked if not done]
    flags = [info["invalid_action"] for _, info, done in blue.asked if not done]
    penalty = round(RewardConfig().invalid, 6)
    assert rewards[:3] == [0.0, penalty, penalty] and flags[:3] == [False, True, True]
    assert ("player_0", "/choose default") in env.session.sent
    assert len([a for a in blue.asked if not a[2]]) == 3 + 2  # 3 illegal, then 2 legal rounds
    assert sides["player_0"].stats.status is SideStatus.INVALID
    assert sides["player_0"].stats.error_line.startswith("InvalidActionError: move '9'")
    # The last step of each side: its end reward, nothing to do, the all-zero mask.
    (last_reward, last_info, done) = blue.asked[-1]
    assert done and last_reward == 1.0 and last_info["needs_action"] is False
    assert last_info["action_mask"].tolist() == [0, 0] and last_info["end_reason"] == "win"
    assert red.asked[-1][0] == -1.0


def test_a_side_that_fails_to_observe_forfeits_before_the_other_sides_choice_counts():
    blue, red = _Side([RuntimeError("makeObs")]), _Side([RuntimeError("step broke")])
    env = _Env(rounds=3)
    sides = _guards(blue, red)
    forfeited, _ = drive_battle(env, 1, sides, Budget())  # type: ignore[arg-type]
    assert forfeited == "player_0" and env.forfeited == "player_0"
    assert sides["player_0"].fatal is SideStatus.ERROR
    assert sides["player_1"].fatal is None  # its failed step was never judged
    assert env.session.sent == []  # no order went out
    assert all(not done for _, _, done in blue.asked + red.asked)  # no last step after a forfeit


@pytest.mark.parametrize("failing", ["player_0", "player_1"])
def test_a_failed_step_forfeits_before_any_order_of_the_round_is_sent(failing):
    orders = {p: [RuntimeError("step broke")] if p == failing else [] for p in PLAYERS}
    env = _Env(rounds=3)
    sides = _guards(_Side(orders["player_0"]), _Side(orders["player_1"]))
    forfeited, _ = drive_battle(env, 1, sides, Budget())  # type: ignore[arg-type]
    assert forfeited == failing and env.session.sent == []


class _OutOfSpaceSide(_Side):
    """A side whose (edge-side) check said its observation was fine, but it is outside the space
    (a user Space subclass whose ``contains`` accepts anything, or a forged ``stepped``)."""

    def decide(self, battle, reward, info, done, *, timeout, queue_limit) -> Decision:
        decision = super().decide(battle, reward, info, done, timeout=timeout, queue_limit=0.0)
        return Decision(
            np.full(3, 7.0, np.float32),
            None,
            stepped=True,
            action=decision.action,
            order=decision.order,
        )


def test_an_observation_outside_the_space_is_refused_by_the_center_whatever_the_side_said():
    blue, red = _OutOfSpaceSide(["/choose move 2"]), _Side([])
    env = _Env(rounds=1)
    sides = _guards(blue, red)
    drive_battle(env, 1, sides, Budget())  # type: ignore[arg-type]
    # The side's order was not played: the default move was, and the observation counted.
    assert ("player_0", "/choose default") in env.session.sent
    assert ("player_0", "/choose move 2") not in env.session.sent
    assert sides["player_0"].stats.status is SideStatus.INVALID
    assert sides["player_0"].stats.error_line.startswith("InvalidObservation")


class _SlowSide(_Side):
    """A side whose every call takes ``seconds`` (charged by its guard's clock: the guard times
    the call itself)."""

    def __init__(self, orders: list[Any], seconds: float) -> None:
        super().__init__(orders)
        self.seconds = seconds

    def decide(self, battle, reward, info, done, *, timeout, queue_limit) -> Decision:
        import time

        time.sleep(self.seconds)
        return super().decide(battle, reward, info, done, timeout=timeout, queue_limit=0.0)


def test_a_side_that_fails_wins_nothing_from_the_other_sides_bank_charged_in_the_same_round():
    # player_0's step raises; player_1 answers legally but spends its whole bank in that round.
    # player_0 forfeits and player_1 wins: its bank is charged only when its order is sent,
    # which never happens in a round where the other side forfeits.
    budget = Budget(decision_time=0.01, bank=0.05, call_cap=1.0)
    blue, red = _Side([RuntimeError("step broke")]), _SlowSide([], seconds=0.2)
    env = _Env(rounds=3)
    sides = {p: SideGuard(s, f"{p}:m:p", budget) for p, s in zip(PLAYERS, (blue, red), strict=True)}
    forfeited, _ = drive_battle(env, 1, sides, budget)  # type: ignore[arg-type]
    assert forfeited == "player_0"
    assert sides["player_0"].fatal is SideStatus.ERROR
    assert sides["player_1"].fatal is None


def test_an_order_sent_ends_the_decision_and_charges_the_bank():
    budget = Budget(decision_time=0.01, bank=0.05, call_cap=1.0)
    blue, red = _Side([]), _SlowSide([], seconds=0.2)
    env = _Env(rounds=3)
    sides = {p: SideGuard(s, f"{p}:m:p", budget) for p, s in zip(PLAYERS, (blue, red), strict=True)}
    forfeited, _ = drive_battle(env, 1, sides, budget)  # type: ignore[arg-type]
    assert forfeited == "player_1" and sides["player_1"].fatal is SideStatus.TIMEOUT
    assert sides["player_1"].stats.error_line.startswith("TimeBankExhausted")


def test_a_battle_is_kept_only_for_the_seat_of_a_side_that_reads_one():
    env = _Env(rounds=1)
    blue, red = _Side([]), _Side([])
    blue.needs_battle = True  # an Agent in this process; red is remote (frames only)
    drive_battle(env, 1, _guards(blue, red), Budget())  # type: ignore[arg-type]
    assert env.session.kept == ["player_0"]


class _RemoteSide(_Side):
    """A side on an edge whose every reset and decision (its last step included) waits at
    ``barrier`` for the other side's: asked one after the other, the first would wait there until
    the barrier broke."""

    queues = True

    def __init__(self, barrier: threading.Barrier) -> None:
        super().__init__([])
        self.barrier = barrier
        self.threads: set[str] = set()

    def reset(self, seed, *, timeout, queue_limit) -> None:
        self.threads.add(threading.current_thread().name)
        self.barrier.wait()

    def decide(self, battle, reward, info, done, *, timeout, queue_limit) -> Decision:
        self.threads.add(threading.current_thread().name)
        self.barrier.wait()
        return super().decide(battle, reward, info, done, timeout=timeout, queue_limit=0.0)


def test_two_sides_on_cpus_of_their_own_are_asked_at_once():
    barrier = threading.Barrier(2, timeout=20)
    blue, red = _RemoteSide(barrier), _RemoteSide(barrier)
    env = _Env(rounds=3)
    sides = _guards(blue, red)
    outcome: list[Any] = []

    def battle_thread() -> None:
        outcome.append(drive_battle(env, 1, sides, Budget(), at_once=True))  # type: ignore[arg-type]

    battle = threading.Thread(target=battle_thread, name="battle-test")
    battle.start()
    battle.join(timeout=60)
    assert not battle.is_alive() and outcome
    assert not barrier.broken  # each reset and decision met the other side's at the barrier
    assert outcome[0] == (None, {"player_0": 0, "player_1": 0})
    assert all(sides[p].fatal is None for p in PLAYERS)
    assert [p for p, _ in env.session.sent] == list(PLAYERS) * 3  # in the players' order
    assert blue.threads == {"battle-test"} and red.threads == {"battle-test-ask"}
    deadline = time.monotonic() + 20
    while any(t.name == "battle-test-ask" for t in threading.enumerate()):
        assert time.monotonic() < deadline, "the helper thread outlived its battle thread"
        time.sleep(0.05)


class _CountingSide(_Side):
    """A side that notes how many calls were in progress when it was called."""

    in_progress = 0
    most = 0

    def decide(self, battle, reward, info, done, *, timeout, queue_limit) -> Decision:
        with self._counted():
            return super().decide(battle, reward, info, done, timeout=timeout, queue_limit=0.0)

    def reset(self, seed, *, timeout, queue_limit) -> None:
        with self._counted():
            pass

    @contextlib.contextmanager
    def _counted(self) -> Iterator[None]:
        _CountingSide.in_progress += 1
        _CountingSide.most = max(_CountingSide.most, _CountingSide.in_progress)
        time.sleep(0.01)
        try:
            yield
        finally:
            _CountingSide.in_progress -= 1


def test_sides_not_apart_are_asked_one_after_the_other():
    # Sides that may share a CPU (in this process, edges on the same CPUs): asked at once, each
    # would slow the other's clock, and which one waited would be a race.
    _CountingSide.most = 0
    env = _Env(rounds=3)
    drive_battle(env, 1, _guards(_CountingSide([]), _CountingSide([])), Budget())  # type: ignore[arg-type]
    assert _CountingSide.most == 1 and len(env.session.sent) == 6


class _LostEdgeSide(_Side):
    """A remote side whose edge is down (the center's own failure: the run stops)."""

    queues = True

    def decide(self, battle, reward, info, done, *, timeout, queue_limit) -> Decision:
        raise EdgeDown("the edge stayed unreachable")


class _SlowRemoteSide(_SlowSide):
    queues = True
    finished = False

    def decide(self, battle, reward, info, done, *, timeout, queue_limit) -> Decision:
        decision = super().decide(battle, reward, info, done, timeout=timeout, queue_limit=0.0)
        self.finished = True
        return decision


def test_an_infrastructure_failure_waits_for_the_other_sides_call_before_it_ends_the_battle():
    # The failure stops the run; the other side's call, in flight on the helper thread, ends
    # first (its session is closed after the battle, never while a call uses it).
    blue, red = _LostEdgeSide([]), _SlowRemoteSide([], seconds=0.3)
    with pytest.raises(EdgeDown):
        drive_battle(_Env(rounds=3), 1, _guards(blue, red), Budget(), at_once=True)  # type: ignore[arg-type]
    assert red.finished
