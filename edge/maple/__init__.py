"""Reference building blocks for agents: StateObserver, ActionHelper, MapleAgent, order checks,
ReplicaBattle.

Imports only ``edge.errors``, ``edge.contract`` (the Agent base) and third-party packages."""
