"""The user-module contract: the Agent and StandalonePolicy a participant writes against, and its loader.

The bottom of the edge: imports only ``edge.errors`` and third-party packages."""
