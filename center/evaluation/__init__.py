"""Matches and leagues, in three rooms: ``playing`` (sides under budgets, the battle loop, the
match), ``recording`` (battles.csv, battle files, run.json, voided battles) and ``judging``
(standings, ratings, the SPRT, series, collusion), over the two modules they all share:
``records`` (a finished battle) and ``schedule`` (the battles to play).

Below ``center.commands`` and ``center.report``: imports ``center.isolation``, ``center.env``,
``center.showdown`` and ``edge.contract/maple/wire``. Judging and recording never import playing."""
