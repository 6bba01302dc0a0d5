"""Battles handed out to runners: one driver, one LOG_DIR, two runner pools.

The driver (:mod:`center.scale.driver`) hands battles out to this process's battle threads
(:mod:`center.scale.local_pool`) or to Ray actors on this host or a cluster
(:mod:`center.scale.ray_pool`, ``--workers`` / ``--ray``, docs/scale.md); a runner
(:mod:`center.scale.runner`) plays them. Ray is imported only by :mod:`center.scale.ray_pool`. In
the center's layers it sits between the commands and the evaluation.
"""
