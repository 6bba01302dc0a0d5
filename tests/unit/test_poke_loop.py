"""poke-env's background loop in a forked worker (edge.service.worker.process): the stopped loop of
the process that forked it gets no thread until something first calls into it, and that first
call (as a poke-env ``Player`` makes through ``run_coroutine_threadsafe``) starts it and is
served."""

from __future__ import annotations

import subprocess
import sys
import textwrap

CHILD = textwrap.dedent(
    """
    import asyncio, os, threading
    import poke_env.concurrency as concurrency
    from edge.service.forking.model_template import _pause_poke_loop
    from edge.service.worker.process import _poke_loop_on_first_call

    def loop_threads():
        return [t.name for t in threading.enumerate() if t.name == "poke-env-loop"]

    _pause_poke_loop()  # as a model's template does before it forks
    pid = os.fork()
    if pid == 0:
        _poke_loop_on_first_call()
        before = loop_threads()

        async def answer():
            return 42

        future = asyncio.run_coroutine_threadsafe(answer(), concurrency.POKE_LOOP)
        print("CHILD", before, future.result(timeout=10), loop_threads(), flush=True)
        os._exit(0)
    os.waitpid(pid, 0)
    os._exit(0)  # poke-env's exit hook would wait for the loop this process stopped
    """
)


def test_the_loop_gets_a_thread_at_its_first_call_and_serves_it():
    run = subprocess.run(
        [sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=60, check=False
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "CHILD [] 42 ['poke-env-loop']", run.stdout + run.stderr
