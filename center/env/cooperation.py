"""What PokemonEnv tells a player's Agent beyond the Agent contract, when the Agent wants to know:
what the policy's next step will be given (before it observes), and why an order was refused.

A guarded or remote side (:class:`center.evaluation.side_guard.SideGuard`'s agent, an
``AgentDelegator``) takes a whole decision in the call that runs ``makeObs``: the environment tells
it first, through ``expect_step``, what the policy's step will be given. A plain Agent (the user
contract) has no such method and is never told.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from edge.errors import InvalidActionError


@runtime_checkable
class ExpectsStep(Protocol):
    """An Agent told, before ``makeObs``, the ``reward``, ``info`` and ``done`` of the policy
    step that follows that observation (while the battle goes on, ``info["action_mask"]`` is
    None: the mask comes from the Agent itself)."""

    def expect_step(self, reward: float, info: dict[str, Any], done: bool = False) -> None: ...


@runtime_checkable
class HearsRefusals(Protocol):
    """An Agent told why the environment refused the order its ``deploy`` returned (the
    environment's check of an order against the request is the center's only one: a guard keeps
    the reason for the side's record)."""

    def order_refused(self, reason: InvalidActionError) -> None: ...
