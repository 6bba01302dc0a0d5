"""The center's command lines: sep_main and sep_eval (run), sep_report (report), sep_replay (replay).

The top layer of the center: thin click commands over ``center.evaluation`` and ``center.report``."""
