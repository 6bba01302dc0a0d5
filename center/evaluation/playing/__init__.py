"""Playing a battle: the sides (in-process or on an edge), the guard and its budgets and timers, the
battle loop, the match, the preflight.

The top room of :mod:`center.evaluation`: may import ``recording``, ``records`` and ``schedule``."""
