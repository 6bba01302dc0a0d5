"""The wire between center and edge: messages (table, tagged bodies, error codes), the envelope
and the codec of a message's frames (msgspec Structs), msgpack values, spaces, endpoints, keys,
sep_config.

Imports only ``edge.errors`` and third-party packages (msgspec, msgpack, zmq, numpy, gymnasium)."""
