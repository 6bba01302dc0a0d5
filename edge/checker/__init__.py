"""The conformance checker: a user module run through recorded decisions and real battles.

The top of the edge: may import every other ``edge`` package; nothing else in ``edge`` imports it."""
