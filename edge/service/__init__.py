"""The edge as a service: the ZeroMQ server, its sandboxing supervisor with the worker template and
the sandboxed workers, sessions serving user code (on replica battles).

May import ``edge.maple``, ``edge.contract``, ``edge.wire`` and ``edge.errors``. Imported only by
``edge.checker`` (which runs recorded decisions through its sessions) and ``edge.cli``; never by
the center."""
