"""The wire between center and edge: messages (table, bodies, error codes), envelopes and headers
(msgspec Structs), msgpack values, spaces, endpoints, keys, sep_config.

Imports only ``edge.errors`` and third-party packages (msgspec, msgpack, zmq, numpy, gymnasium)."""
