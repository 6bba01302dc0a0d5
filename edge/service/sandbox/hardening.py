"""The hardening a sandboxed edge's workers get: what the host permits (probed by the zygote), as
the options ask, and a user id of their own only where they can still read Python and the
candidates' modules; and the paths a worker keeps under its private folders (:func:`kept_paths`)."""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from edge.contract.candidates import Candidate
from edge.service.sandbox.limits import PRIVATE_FOLDERS, Hardening, paths_to_expose, paths_under
from edge.service.sandbox.seccomp import seccomp_problem

__all__ = ["EDGE_PACKAGE", "choose_hardening", "kept_paths", "module_place"]

#: The folder of this package: workers read its files (data, lazily imported modules) at run time.
EDGE_PACKAGE: Final = Path(__file__).resolve().parents[2]


def choose_hardening(
    possible: Hardening,
    candidates: Mapping[str, Candidate],
    drop_privileges: bool,
    isolate_network: bool,
) -> Hardening:
    """The hardening workers get: what the host permits, as asked, and a user id of their own
    only where they can still read Python and the candidates' modules."""
    why = dict(possible.why_off)
    user = possible.user and drop_privileges
    if possible.user and not drop_privileges:
        why["user"] = "not asked (--no-drop-privileges)"
    exposed: dict[str, list[str]] = {}
    if user:
        # A worker with its own user id must still read Python and the candidates' modules.
        needed = [Path(p) for p in sys.path if p and Path(p).is_dir()]
        needed += [Path(sys.prefix), Path(sys.base_prefix), Path(sys.exec_prefix)]
        needed += [c.folder for c in candidates.values()]
        needed += [EDGE_PACKAGE, *(module_place(c) for c in candidates.values())]
        exposed, unreadable = paths_to_expose(needed)
        if unreadable is not None or (exposed and not possible.mount_namespace):
            user = False
            why["user"] = (
                f"{unreadable or next(iter(exposed))} is not readable by other users, and "
                "workers must read Python and the candidates' modules: make it readable to "
                "turn this on"
            )
            exposed = {}
    seccomp_off = seccomp_problem()  # as root or not: filters need only no_new_privs
    if seccomp_off is not None:
        why["seccomp"] = seccomp_off
    network = possible.network and isolate_network
    if possible.network and not isolate_network:
        why["network"] = "not asked (--allow-network)"
    return Hardening(
        user=user,
        network=network,
        pid_namespace=possible.pid_namespace,
        mount_namespace=possible.mount_namespace,
        ipc_namespace=possible.ipc_namespace,
        private_tmp=possible.private_tmp,
        private_proc=possible.private_proc,
        seccomp=seccomp_off is None,
        model_template=possible.model_template,
        exposed=exposed,
        uid_base=possible.uid_base,
        gid=possible.gid,
        why_off=why,
    )


def module_place(candidate: Candidate) -> Path:
    """The folder that holds the candidate's module where it really is: the target of a link in
    the candidates' folder (the checker links the module into a folder of its own), resolved."""
    top = candidate.module_id.split(".")[0]
    for place in (candidate.folder / top, candidate.folder / f"{top}.py"):
        with contextlib.suppress(OSError):
            if place.exists():
                resolved = place.resolve(strict=True)
                return resolved if resolved.is_dir() else resolved.parent
    return candidate.folder


def kept_paths(hardening: Hardening, candidate: Candidate) -> list[str]:
    """What a worker of ``candidate`` must still see under its private folders: the module's
    folder, its team's, Python's own paths and this package's (an editable install finds it
    through an import hook, not sys.path), when they lie in /tmp, say."""
    if not hardening.private_tmp:
        return []
    top = candidate.module_id.split(".")[0]
    needed = [
        candidate.folder,
        candidate.folder / top,  # a package right in /tmp is kept by itself
        module_place(candidate),  # where a link there leads (the checker links the module)
    ]
    if candidate.team_path is not None:
        needed.append(candidate.team_path.parent)
    return sorted({*_kept_for_all(), *paths_under(PRIVATE_FOLDERS, needed)})


@functools.cache
def _kept_for_all() -> tuple[str, ...]:
    """This process's own paths under the private folders, read once (the supervisor's sys.path
    and this package do not move while it serves)."""
    return tuple(paths_under(PRIVATE_FOLDERS, [EDGE_PACKAGE, *(Path(p) for p in sys.path if p)]))
