"""Remote agents seen from the center: the edge client and the Agent/Policy delegators.

Imports ``center.env`` (frames), ``edge.contract`` and ``edge.wire``; never evaluation."""
