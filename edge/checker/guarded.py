"""The checks in a child process: a module that kills its process fails the checker, not the shell.

The recorded decisions run the participant's code in the checker's own process (through the edge's
session code, as on an edge). A module that calls ``os._exit``, crashes in C or runs out of memory
would take the checker down with it, with no report. :func:`check_in_child` runs
:func:`~edge.checker.run.check_user_module` in a forked child and reads its report back as JSON
through a pipe (never pickle: the child ran untrusted code); if the child dies first, the report
says how, as the edge's sandbox would ("worker exited with code 3", "killed by signal 11"). The child
has the memory limit of an edge's worker (``--memory-limit``, 4 GiB by default), so that a module
that needs more fails here rather than in its battles.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
from pathlib import Path
from typing import Any

from edge.checker.report import CheckReport, CheckResult, Status
from edge.checker.run import check_user_module
from edge.service.sandbox import Limits, describe_exit

__all__ = ["check_in_child"]

_FIX = (
    "the module ended the process it runs in; on an edge that ends every battle of the model as "
    "ERROR: do not call os._exit/sys.exit, and keep C extensions and memory in check"
)


def _to_json(report: CheckReport) -> bytes:
    data = dataclasses.asdict(report)
    data["candidates_path"] = str(report.candidates_path)
    return json.dumps(data).encode()


def _from_json(raw: bytes) -> CheckReport:
    data: dict[str, Any] = json.loads(raw)
    report = CheckReport(model_id=data["model_id"], candidates_path=Path(data["candidates_path"]))
    report.results = [
        CheckResult(r["name"], Status(r["status"]), r["message"], r["fix"]) for r in data["results"]
    ]
    report.notes = list(data["notes"])
    return report


def check_in_child(
    candidates_path: str | Path, model_id: str, memory: int = Limits.memory, **options: Any
) -> CheckReport:
    """:func:`check_user_module` in a forked child whose address space is limited to ``memory``
    bytes (0: no limit), as an edge's workers are; a report of how it died if it does."""
    limits = Limits(memory=memory, cpu_seconds=0, file_size=0, open_files=0)
    read_end, write_end = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: check, send the report, leave without running any cleanup
        os.close(read_end)
        code = 0
        try:
            limits.apply(own_user=False)
            payload = _to_json(check_user_module(candidates_path, model_id, **options))
            with os.fdopen(write_end, "wb") as out:
                out.write(payload)
        except BaseException:
            code = 70
        os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        raw = pipe.read()
    _, status = os.waitpid(pid, 0)
    if raw and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
        return _from_json(raw)
    cause = describe_exit(status, limits).replace("worker", "the checker's process")
    report = CheckReport(model_id=model_id, candidates_path=Path(candidates_path).absolute())
    report.results = [CheckResult("process", Status.FAIL, f"{cause} while checking", _FIX)]
    return report
