"""Exceptions raised by the center (Showdown management, environment, isolation, matches).

Exception tree::

    CenterError
    ├── ShowdownError              the local Showdown server cannot be used
    │   ├── ShowdownNotInstalled   node, npm or the pinned install is missing (says which command fixes it)
    │   └── ShowdownStartError     the server did not come up or answer in time
    ├── EnvError                   misuse of PokemonEnv or a battle that cannot be set up
    │   ├── ResetTimeout           no battle was established within RESET_TIMEOUT (also a TimeoutError)
    │   └── EnvClosedError         the environment was used after close()
    ├── ConfigError                a bad candidates.json / sep_config.json / command-line value
    ├── ResultsError               battles.csv or run.json cannot be used (foreign header, LOG_DIR in
    │   │                          use, unreadable)
    │   ├── RunConflictError       a rerun on a LOG_DIR does not match the run recorded there (also a
    │   │                          ConfigError: a command-line value is wrong)
    │   └── NoRunError             the folder holds neither battles.csv nor run.json: nothing to report
    ├── InfrastructureError        a battle could not be played because of the center itself (Showdown
    │   │                          died, no battle could be started, an edge process was lost): not
    │   │                          recorded, a rerun replays it
    │   └── EdgeDown               an edge process stayed unreachable past --edge-wait: the run stops
    ├── EdgeFull                   an edge has no worker for a session now (all serve sessions, or
    │                              the host's memory budget is taken): the battle waits, unbooked
    ├── EdgeCallError              a call to an edge gave no usable reply
    │   ├── EdgeUnavailable        no connection to the edge: nobody listening, connection lost,
    │   │   │                      client closed (also a ConnectionError)
    │   │   └── AuthenticationError   the CURVE handshake failed: wrong server key, client key not
    │   │                          authorized, or only one side uses CURVE
    │   ├── EdgeTimeout            the request was sent but no reply came before its deadline (also
    │   │                          a TimeoutError)
    │   ├── EdgeRemoteError        the edge answered status "error": carries code, ename, evalue, …
    │   └── EdgeProtocolError      a request that cannot be encoded or a reply that violates the
    │                              protocol
    └── SideError                  a call into one side's code failed in a way the center books: its
                                   cause (an edge's error code, or what the center saw) and its row
                                   of the outcome table (edge.contract.outcomes.OUTCOMES)
"""

from __future__ import annotations

from typing import Any

from edge.contract.outcomes import Outcome, outcome_of
from edge.contract.runner import UserFailure


class CenterError(Exception):
    """Root of every exception raised by the ``center`` package."""


class ShowdownError(CenterError):
    """The local Pokémon Showdown server cannot be used."""


class ShowdownNotInstalled(ShowdownError):
    """node, npm or the pinned Showdown install is missing."""


class ShowdownStartError(ShowdownError):
    """The Showdown server did not start or did not answer in time."""


class EnvError(CenterError):
    """PokemonEnv was misused, or a battle could not be set up."""


class ResetTimeout(EnvError, TimeoutError):
    """No battle was established within RESET_TIMEOUT."""


class EnvClosedError(EnvError):
    """The environment was used after ``close()``."""


class ConfigError(CenterError):
    """A configuration file or command-line value is invalid."""


class ResultsError(CenterError):
    """battles.csv or run.json cannot be used (foreign header, LOG_DIR in use, unreadable)."""


class RunConflictError(ResultsError, ConfigError):
    """A rerun on an existing LOG_DIR does not match the run recorded there."""


class NoRunError(ResultsError):
    """The folder holds neither battles.csv nor run.json: there is nothing to report."""


class InfrastructureError(CenterError):
    """A battle could not be played because of the center's own side (not recorded)."""


class EdgeDown(InfrastructureError):
    """An edge process stayed unreachable past ``--edge-wait``: the run stops, nothing is booked."""


class EdgeFull(CenterError):
    """An edge cannot start a worker for a session now (its workers all serve sessions, or the
    host's memory budget is taken): no fault of the candidate's; the battle waits and asks again."""


class EdgeCallError(CenterError):
    """A call to an edge did not give a usable reply."""


class EdgeUnavailable(EdgeCallError, ConnectionError):
    """There is no connection to the edge (nobody listening, connection lost, client closed).

    A request that fails this way was either never sent or lost with its connection.
    """


class AuthenticationError(EdgeUnavailable):
    """The CURVE handshake with the edge failed; the message says what is probably wrong."""


class EdgeTimeout(EdgeCallError, TimeoutError):
    """A request reached the edge but its reply did not come back before the deadline."""


class EdgeRemoteError(EdgeCallError):
    """The edge answered with status ``error``: an exception in a handler or in user code.

    ``code`` says what kind of error it is (an ``edge.wire.messages.ErrorCode`` value): programs
    match on it. ``ename``, ``evalue`` and ``traceback`` (truncated) describe the remote exception
    for humans; ``output`` is what user code printed during the call (truncated), possibly empty;
    ``usage`` is what the call cost on the edge (an ``edge.wire.messages.CallUsage``) when the
    edge's supervisor says; ``call`` is the user call that raised or overran, "" when not known.
    """

    def __init__(
        self,
        ename: str,
        evalue: str,
        traceback: str = "",
        output: str = "",
        *,
        code: str = "",
        usage: Any = None,
        call: str = "",
    ) -> None:
        super().__init__(f"{ename}: {evalue}" if evalue else ename)
        self.ename = ename
        self.evalue = evalue
        self.traceback = traceback
        self.output = output
        self.code = code
        self.usage = usage
        self.call = call


class EdgeProtocolError(EdgeCallError):
    """A request could not be encoded, or the edge's reply violates the wire protocol."""


class SideError(CenterError):
    """A call into one side's code failed in a way the center books as that side's outcome.

    ``cause`` is a key of the outcome table (an ``ErrorCode`` value of the edge's reply, or an
    ``edge.contract.outcomes.Seen``); ``outcome`` its row, what it books. ``failure`` is what the
    side's code raised, as data, when it raised (on an edge: the type, message and traceback of its
    error reply); ``call`` the user call that raised or overran (``policy.step``), "" when unknown.
    """

    def __init__(
        self, cause: str, message: str, *, failure: UserFailure | None = None, call: str = ""
    ) -> None:
        super().__init__(message)
        self.cause = cause
        self.outcome: Outcome = outcome_of(cause)
        self.failure = failure
        self.call = call
