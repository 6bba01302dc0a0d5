"""Seasons: ``sep_ladder``, a long-running center over a SEASON_DIR (docs/seasons.md).

Above :mod:`center.scale` and :mod:`center.report` in the center's layers: it plays battles with
their driver and runners and writes the pages a league writes; only :mod:`center.commands` is above.
"""
