"""What a run keeps: battles.csv, the battle files and replay pages, run.json and its provenance,
the run's secret, the voided battles.

Below :mod:`center.evaluation.playing`: imports ``judging`` (run.json keeps the SPRT's settings),
``records`` and ``schedule``; never playing."""
