"""The edge's socket server (ZeroMQ, CURVE, ``hello``), what its dispatchers agree on and the
replies it sends. Knows no worker, zygote, model template or sandbox: the bottom of the service."""
