"""What the supervisor tells the process that forks a worker (the zygote or a model's template)
about the worker to start: the spec's plain data (msgpack safe, built by the supervisor) and its
view in that process and the worker (``edge.service.worker.process``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from edge.contract.candidates import Candidate
from edge.service.sandbox.limits import Hardening, Limits

__all__ = ["WorkerSpec"]


class WorkerSpec:
    """What the supervisor tells the zygote or a model's template about a worker to start
    (msgpack-safe fields)."""

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data
        self.side: str = data["side"]
        self.instance: str = data["instance"]
        self.slot: int = int(data["slot"])
        self.home: str = data["home"]
        self.max_message_size: int = int(data["max_message_size"])
        #: the ``cgroup.procs`` files of the worker's control groups, joined first thing
        self.cgroup_procs: list[str] = [str(p) for p in data.get("cgroup_procs", [])]
        #: folders under the private ones (a module in /tmp) that stay visible, read-only
        self.keep_paths: list[str] = [str(p) for p in data.get("keep_paths", [])]
        #: the model endpoints granted to its model: {NAME: base path of the organizer's URL}
        self.endpoints: dict[str, str] = {
            str(k): str(v) for k, v in data.get("endpoints", {}).items()
        }
        self.limits = Limits(**data["limits"])
        self.hardening = Hardening.from_dict(data["hardening"])
        entry = data["candidate"]
        self.candidate = Candidate(
            model_id=entry["model_id"],
            module_id=entry["module_id"],
            args=dict(entry["args"]),
            log_name=entry["log_name"],
            team=entry["team"],
            team_path=Path(entry["team_path"]) if entry["team_path"] else None,
            source=Path(entry["source"]),
        )

    @staticmethod
    def build(
        *,
        side: str,
        instance: str,
        slot: int,
        home: str,
        max_message_size: int,
        limits: Limits,
        hardening: Hardening,
        candidate: Candidate,
        cgroup_procs: list[str] | None = None,
        keep_paths: list[str] | None = None,
        endpoints: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        """The plain data of a spec (what travels to the zygote or a model's template)."""
        return {
            "endpoints": dict(endpoints or {}),
            "cgroup_procs": list(cgroup_procs or []),
            "keep_paths": list(keep_paths or []),
            "side": side,
            "instance": instance,
            "slot": slot,
            "home": home,
            "max_message_size": max_message_size,
            "limits": limits.as_dict(),
            "hardening": hardening.as_dict(),
            "candidate": {
                "model_id": candidate.model_id,
                "module_id": candidate.module_id,
                "args": candidate.args,
                "log_name": candidate.log_name,
                "team": candidate.team,
                "team_path": str(candidate.team_path) if candidate.team_path else None,
                "source": str(candidate.source),
            },
        }

    @property
    def uid(self) -> int:
        return self.hardening.uid_base + self.slot
