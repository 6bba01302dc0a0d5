"""Host-wide claims (worker user ids, CPUs): two processes on one host never both hold a number,
and a claim dies with its process, however it dies."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from edge.service.supervision.host_locks import HostClaims

HOLDER = """
import sys, time
from pathlib import Path
from edge.service.supervision.host_locks import HostClaims
claims = HostClaims("uid", Path(sys.argv[1]))
print(claims.claim_lowest(), claims.claim_lowest(), flush=True)
time.sleep(120)
"""


def test_another_process_never_gets_a_number_held_and_gets_it_once_the_holder_dies(
    tmp_path: Path,
):
    folder = tmp_path / "claims"
    folder.mkdir(mode=0o700)
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(folder)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().split() == ["0", "1"]  # the holder's two user ids
        mine = HostClaims("uid", folder)
        assert not mine.try_claim(0) and not mine.try_claim(1)
        assert mine.claim_lowest() == 2  # the lowest number no process on the host holds
        assert HostClaims("cpu", folder).claim_lowest() == 0  # another kind: its own numbers
        os.kill(holder.pid, signal.SIGKILL)  # as a crash would: no release
        holder.wait(timeout=30)
        assert mine.try_claim(0) and mine.try_claim(1)
        assert mine.held() == {0, 1, 2}
        mine.release_all()
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(timeout=30)
