"""The edge as a service: the ZeroMQ server, its sandboxing supervisor with the worker template and
the sandboxed workers, sessions serving user code (on replica battles).

May import every other ``edge`` package; nothing outside ``edge.service`` imports it."""
