"""The loading checks, judged from what a battle's ``open_session`` does on the edge's worker.

``open_session`` loads the model as a battle does, in one call: the import, ``getUserAgentClass``,
``getUserAgentModelConfig``, the Agent's construction and its required members, ``getUserPolicy``,
then the spaces sent back. The checker cannot look inside the worker (its word about itself is
worth nothing: user code shares its process), so a loading check passes only when open_session
answered with spaces the wire carries, and an error reply fails the check of the step that raised
(the loader's own message says which, :func:`failed_checks`) and every check before it passes.
"""

from __future__ import annotations

import re
from typing import Final

from edge.checker.checks import describe_space, observation_size_warning
from edge.checker.report import Tally
from edge.wire.messages import ErrorBody, OpenSessionReply

__all__ = [
    "IMPORT_HINT",
    "LOADING_ORDER",
    "failed_checks",
    "load_timeout",
    "record_failure",
    "record_opened",
]

#: What to do when the module's import is what takes the loading time.
IMPORT_HINT: Final = (
    "keep heavy frameworks (torch, tensorflow) off the edge: export the network to numpy, or ask "
    "for an edge with a higher --load-limit (docs/contract.md, 'Time')"
)

#: The loading checks in the order open_session makes their calls.
LOADING_ORDER: Final = (
    "import",
    "functions",
    "agent_class",
    "optional_functions",
    "agent_init",
    "agent_methods",
    "policy",
    "spaces",
)

#: The check of each contract function's result.
_FUNCTION_CHECKS: Final = {
    "getUserAgentClass": "agent_class",
    "getUserAgentModelConfig": "optional_functions",
    "isUserAgentSingleAsset": "optional_functions",
    "getUserPolicy": "policy",
}

# What edge.contract.user_module's errors say after "model 'm' (module 'x'): ".
_PREFIX = re.compile(r"model '.*?' \(module '.*?'\): ", re.DOTALL)
_NOT_A_FUNCTION = re.compile(r"(\w+) is a \w+, not a function")
_CONSTRUCTOR = re.compile(r"[\w.]+\(modelConfig, instanceConfig\) raised ")
_MEMBERS = re.compile(r"the Agent \w+ has no |[\w.]+\.(makeObs|deploy) is not callable")


def failed_checks(error: ErrorBody) -> tuple[str, ...]:
    """The loading checks an open_session error reply fails (in :data:`LOADING_ORDER`)."""
    if error.ename == "ProtocolError":  # the reply could not be encoded: its spaces
        return ("spaces",)
    match = _PREFIX.match(error.evalue)
    if error.ename != "ContractError" or match is None:
        return ("agent_init",)  # raised outside the loader's steps: the session's making
    text = error.evalue[match.end() :]
    if text.startswith(("importing it", "no module ", "'")):
        return ("import",)
    function = text.removeprefix("has no function ").split(";")[0].strip()
    named = _NOT_A_FUNCTION.match(text)
    if named is not None:
        function = named.group(1)
    if function in _FUNCTION_CHECKS and (named is not None or text.startswith("has no function")):
        return ("functions", _FUNCTION_CHECKS[function])
    for name, check in _FUNCTION_CHECKS.items():
        if text.startswith(f"{name}(args)"):
            return (check,)
    if _CONSTRUCTOR.match(text):
        return ("agent_init",)
    if _MEMBERS.match(text):
        return ("agent_methods",)
    return ("agent_init",)


def record_failure(tallies: dict[str, Tally], failed: tuple[str, ...], message: str) -> None:
    """``failed`` fail with ``message``; the checks before the last of them pass (open_session
    got past them), the ones after it are skipped."""
    last = max(LOADING_ORDER.index(name) for name in failed)
    for name in LOADING_ORDER[:last]:
        if name not in failed:
            tallies[name].ok("open_session got past it")
    for name in failed:
        tallies[name].fail(message)
    for name in LOADING_ORDER[last + 1 :]:
        if tallies[name].ran == 0:
            tallies[name].skipped = f"skipped: needs {LOADING_ORDER[last]}"


def record_opened(tallies: dict[str, Tally], module_id: str, reply: OpenSessionReply) -> None:
    """Every loading check passes: open_session answered with spaces the wire carries."""
    policy = reply.agent_full_name.rsplit(":", 1)[-1][:60]
    details = {
        "import": f"{module_id} imported in a sandboxed worker of the edge",
        "functions": "the contract functions answered (getUserAgentClass and getUserPolicy, or "
        "getUserPlayerClass)",
        "agent_class": "the Agent class (or the Player class) was returned",
        "optional_functions": "getUserAgentModelConfig(args), if defined, returned a dict",
        "agent_init": "an Agent (or a Player) built for each sample",
        "agent_methods": "the Agent has makeObs and deploy (a Player: choose_move)",
        "policy": f"the policy is a {policy}",
        "spaces": f"observation_space {describe_space(reply.observation_space)}, "
        f"action_space {describe_space(reply.action_space)}",
    }
    warning = observation_size_warning(reply.observation_space)
    if warning:
        details["spaces"] += f"; {warning}"
    for name in LOADING_ORDER:
        tallies[name].ok(details[name])


def load_timeout(limit: float) -> str:
    """The ``time`` check's message when open_session ran past the load limit."""
    return (
        f"loading took more than {limit:g} s: open_session (the import, the contract functions, "
        f"the policy and an Agent) did not return; a battle gives {limit:g} s for all of it. "
        f"Most often the import is what is slow: {IMPORT_HINT}"
    )
