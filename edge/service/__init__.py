"""The edge as a service: ``sep_edge`` serves a participant's modules to the center, running their
code in sandboxed worker processes.

Sub-packages by idea, top to bottom: ``supervision``, ``forking``, ``worker``, ``endpoints``, then
``server``, ``sandbox`` and ``channel`` (pyproject.toml's contracts). May import ``edge.maple``,
``edge.contract``, ``edge.wire`` and ``edge.errors``; imported only by ``edge.checker``,
``edge.submit`` and ``edge.cli``, never by the center.
"""
