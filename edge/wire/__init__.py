"""The wire between center and edge: messages (table, bodies, error codes), the codec (``codec``
re-exports envelopes, headers, body_conversion, envelope_fields and msgpack_values), spaces,
endpoints, keys, sep_config.

Imports only ``edge.errors`` and third-party packages (msgpack, zmq, numpy, gymnasium)."""
