"""Battles spread over battle runners: one driver, one LOG_DIR, runners on this host or a Ray cluster.

``sep_main … --workers W`` / ``--ray ADDRESS`` (see docs/scale.md). The driver
(:func:`center.scale.driver.drive_battles`) hands the schedule's battles out in order, a runner
(:class:`center.scale.runner.BattleRunner`) plays them with its own simulator host and its own
edge connections and sends back each battle's record and files, and the driver is the only writer
of LOG_DIR. Ray itself is imported only by :mod:`center.scale.ray_pool`, which only ``--workers``
and ``--ray`` load: a plain run imports nothing of Ray.

This package sits between the commands and the evaluation in the center's layers: it drives what
:mod:`center.evaluation` plays and records, and only the commands use it.
"""
