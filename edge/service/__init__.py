"""The edge as a service: the ZeroMQ server, sessions serving user code (on replica battles), CLIs.

May import every other ``edge`` package; nothing outside ``edge.service`` imports it."""
