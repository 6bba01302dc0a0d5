"""The conformance checker: a user module run through recorded decisions and real battles.

``checks`` (the pure checks and the CHECKS table), ``report`` (the report types), ``run`` (the
recorded battles played through the edge's own sandbox, ``sandboxed``; the checker's process never
imports user code), ``battles`` (real battles through real
``sep_edge`` and ``sep_main`` processes), ``samples`` (the recorded battles shipped), and the command
line ``python -m edge.checker``. The top of the edge: may import every other ``edge`` package;
nothing else in ``edge`` imports it (``edge.cli`` only when ``--check`` is given)."""
