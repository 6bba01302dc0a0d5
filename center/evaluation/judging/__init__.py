"""Judging finished battles: standings and their files, the rating methods and their model, the
SPRT and its bookkeeping, best-of-N series, the gauntlet, the collusion check.

The bottom room of :mod:`center.evaluation`: imports only ``records`` and ``schedule``."""
