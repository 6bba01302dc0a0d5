"""Battles spread over battle runners: one driver, one LOG_DIR, runners on this host or a Ray cluster.

``sep_main … --workers W`` / ``--ray ADDRESS`` (docs/scale.md): the driver
(:mod:`center.scale.driver`) hands battles out, each runner (:mod:`center.scale.runner`) plays them
with its own simulator host and edge connections. Ray is imported only by
:mod:`center.scale.ray_pool`. In the center's layers it sits between the commands and the evaluation.
"""
