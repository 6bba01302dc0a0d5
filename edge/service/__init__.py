"""The edge as a service: ``sep_edge`` serves a participant's modules to the center, running their
code in sandboxed worker processes.

One module per idea (docs/architecture.md lists them). May import ``edge.maple``,
``edge.contract``, ``edge.wire`` and ``edge.errors``; imported only by ``edge.checker`` and
``edge.cli``, never by the center.
"""
