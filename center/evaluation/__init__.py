"""Matches and leagues: sides under budgets, scheduling, battles.csv, run.json, standings.

Below ``center.commands`` and ``center.report``: imports ``center.isolation``, ``center.env``,
``center.showdown`` and ``edge.contract/maple/wire``."""
