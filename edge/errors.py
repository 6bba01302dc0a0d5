"""Exceptions raised by the edge side (user-module contract, protocol, replica).

Exception tree::

    EdgeError
    ├── ContractError          a user module breaks the pinned contract (missing function, bad type)
    ├── UserCallTimeout        a call into user code did not return by its deadline (also a TimeoutError)
    ├── CandidatesError        candidates.json is unreadable or an entry is malformed
    ├── SepConfigError         sep_config.json is missing, not JSON, or lacks a side's host and port
    ├── StateSpecError         the observation spec is unreadable or invalid (also a ValueError)
    ├── InvalidActionError     an action index or team choice that is not legal now (also a ValueError)
    ├── ProtocolError          a message that cannot be decoded or violates the wire protocol
    │   ├── MessageTooLarge    a message over the configured maximum size
    │   └── ProtocolVersionError  a message from a peer speaking an incompatible protocol version
    ├── TransportError         the edge server cannot be set up (bind failure, bad keys)
    │   ├── InsecureBindError  a non-loopback address without CURVE keys and without --insecure
    │   └── CurveKeyError      a CURVE key or key file is missing or malformed (also a ValueError)
    ├── ReplicaError           the replica battle cannot apply a frame
    ├── UnknownSession         a request names a session this edge does not have (never opened,
    │                          closed or expired); in edge/service/worker/sessions.py, next to its code
    ├── UnknownModel           the center asked for a model candidates.json does not list; in
    │                          edge/service/worker/sessions.py, next to its code
    ├── ZygoteError            the edge's zygote (the process that forks workers) could not start
    │                          or went away; in edge/service/forking/zygote.py
    ├── LedgerError            a season's database or season.json cannot be used (names the file);
    │                          in edge/contract/season_ledger.py, next to the ledger
    ├── Stuck                  the checker: an earlier user call never returned or its worker
    │                          died, so no more user code runs; in edge/checker/calls.py
    └── WorkerDied             the checker: the edge worker serving a call died; in
                               edge/checker/calls.py

UnknownSession and UnknownModel name their wire error code (``error_code``, an ``edge.wire``
enum), which is why they live in ``edge.service`` and not here: ``edge.wire`` imports this module.
"""

from __future__ import annotations


class EdgeError(Exception):
    """Root of every exception raised by the ``edge`` package."""


class ContractError(EdgeError):
    """A user module does not follow the user-module contract."""


class UserCallTimeout(EdgeError, TimeoutError):
    """A call into user code did not return by its deadline (its worker was abandoned)."""


class CandidatesError(EdgeError):
    """``candidates.json`` cannot be read, or one of its entries is malformed (names file and entry)."""


class SepConfigError(EdgeError):
    """sep_config.json is missing, not JSON, or lacks a side's host and port."""


class StateSpecError(EdgeError, ValueError):
    """The observation spec is unreadable or invalid; the message names the bad entry."""


class InvalidActionError(EdgeError, ValueError):
    """An action (index or team choice) that is not legal for the current request."""


class ProtocolError(EdgeError):
    """A message violates the wire protocol."""


class MessageTooLarge(ProtocolError):
    """A message is larger than the configured maximum."""


class ProtocolVersionError(ProtocolError):
    """A message carries a protocol version this side does not speak (different major version)."""


class TransportError(EdgeError):
    """The ZeroMQ transport cannot be set up (the address cannot be bound, keys are unusable)."""


class InsecureBindError(TransportError):
    """Refused to listen on a non-loopback address without CURVE keys (see ``insecure``)."""


class CurveKeyError(TransportError, ValueError):
    """A CURVE key, key file or ``curve`` configuration section is missing or malformed."""


class ReplicaError(EdgeError):
    """A replica battle could not apply a protocol frame."""
