"""The edge as a service: the ZeroMQ server, sessions serving user code, the replica battle, CLIs.

May import every other ``edge`` package; nothing outside ``edge.service`` imports it."""
