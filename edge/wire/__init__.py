"""The wire between center and edge: messages (table, bodies, error codes), codec, spaces, endpoints,
keys, sep_config.

Imports only ``edge.errors`` and third-party packages (msgpack, zmq, numpy, gymnasium)."""
