"""A seat's light view reads its frames as poke-env's Battle reads them: after every frame of the
recorded battles, the same request, turn, team preview, tag, players and result."""

from __future__ import annotations

import pytest

from center.env.seat_view import SeatView
from edge.contract.showdown_request import ShowdownRequest, request_of
from tests.fixtures.replay import VIEWED, all_recordings, replay_frames

RECORDINGS = [(r, user) for r in all_recordings() for user in r.usernames]


@pytest.mark.parametrize(
    ("recording", "username"), RECORDINGS, ids=[f"{r.path.name}:{u}" for r, u in RECORDINGS]
)
def test_the_view_reads_every_frame_as_the_battle_does(recording, username):
    view = SeatView(username)
    frames = recording.frames[username]
    for i, battle in enumerate(replay_frames(frames, username)):
        view.feed(frames[i])
        for name in VIEWED:
            assert getattr(view, name) == getattr(battle, name), (i, name)
        assert view.request == request_of(battle), i
    assert view.finished


def test_the_view_says_what_the_session_acts_on_in_order():
    view = SeatView("me")
    frame = '>battle-x\n|error|[Unavailable choice] Can\'t switch\n|request|{"wait":true}\n|win|me'
    kinds = [kind for kind, _ in view.feed(frame)]
    assert kinds == ["error", "request", "end"]
    assert view.won is True and view.lost is False and view.battle_tag == "battle-x"


@pytest.mark.parametrize("tie", ["|tie", "|tie|"])
def test_a_tie_ends_the_view_with_or_without_its_bar(tie):
    view = SeatView("me")
    assert view.feed(f">battle-x\n|turn|7\n{tie}") == [("end", None)]
    assert view.finished and view.won is None and view.lost is None and view.turn == 7


def test_only_lines_that_start_with_a_bar_count():
    view = SeatView("me")
    frame = '>battle-x\nturn|9\n|turn\n| turn|8\n|win\nwin|me\n|\n|request|{"wait":true}\n|turn|3'
    assert view.feed(frame) == [("request", ShowdownRequest(wait=True))]
    assert view.turn == 3 and not view.finished
