"""Sample user modules, written exactly as a participant would write theirs (docs/contract.md), and
listed in the top-level ``candidates.json``.

- ``random_agent``: a uniformly random legal action.
- ``max_power``: the legal move with the highest base power × type effectiveness × STAB.
- ``heuristic``: poke-env's ``SimpleHeuristicsPlayer`` behind the contract.
- ``learned_policy``: a MaskablePPO network run with numpy (``scripts/train_maskable_ppo.py``).
"""
