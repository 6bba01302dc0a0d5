"""Remote sides seen from the center: the edge client, edge sessions and the remote side.

Imports ``center.env`` (frames), ``edge.contract`` and ``edge.wire``; never evaluation."""
