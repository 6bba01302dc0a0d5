"""Matches and leagues: sides under budgets, scheduling, battles.csv, standings, the CLIs.

The top layer of the center: may import every other center package, and ``edge.contract/maple/wire``."""
