"""A thread's helper runs the calls handed to it on a daemon thread, and ends with its owner."""

from __future__ import annotations

import threading
import time

import pytest

from center.evaluation.playing.helper_thread import HelperThread, helper_thread


def test_a_call_s_result_and_exception_come_back_through_its_future():
    helper = HelperThread("test-helper")
    assert helper.thread.daemon  # a process that exits mid-battle does not wait for it
    ran_on = helper.submit(lambda: threading.current_thread().name)
    assert ran_on.result(timeout=10) == "test-helper"
    failed = helper.submit(lambda: 1 / 0)
    with pytest.raises(ZeroDivisionError):
        failed.result(timeout=10)
    assert helper.submit(lambda: "still serving").result(timeout=10) == "still serving"


def test_each_thread_has_its_own_helper_which_ends_when_the_thread_does():
    seen: list[HelperThread] = []

    def battle_thread() -> None:
        seen.extend([helper_thread(), helper_thread()])

    thread = threading.Thread(target=battle_thread, name="battle-x")
    thread.start()
    thread.join(timeout=10)
    assert seen[0] is seen[1]  # made once per thread
    helper = seen.pop().thread
    seen.clear()
    assert helper.name == "battle-x-ask"
    helper.join(timeout=10)  # the battle thread's locals went, and with them its helper
    assert not helper.is_alive()


def test_calls_run_one_at_a_time_in_order():
    helper = HelperThread("test-order")
    done: list[int] = []

    def call(i: int) -> None:
        time.sleep(0.01)
        done.append(i)

    futures = [helper.submit(lambda i=i: call(i)) for i in range(5)]
    for future in futures:
        future.result(timeout=10)
    assert done == [0, 1, 2, 3, 4]
