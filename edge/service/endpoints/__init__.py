"""The model endpoints (``sep_edge --endpoint NAME=URL``): the supervisor's forwarder, its token
budget, its HTTP pieces and options, and the doors a worker opens on its own loopback. Imports
only the channel of the service."""
