"""Reference building blocks for agents: StateObserver, ActionHelper, MapleAgent, order checks.

Imports only ``edge.errors``, ``edge.contract`` (the Agent base) and third-party packages."""
