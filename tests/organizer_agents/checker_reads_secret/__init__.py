"""Hostile on purpose: getUserAgentClass reads a file only its owner may read (the path in
$SEP_CHECKER_SECRET; a real attack reads a CURVE secret key) and raises an error that carries what
it read, or why it could not: the checker's report prints that error."""

import os


def getUserAgentClass(args):
    path = os.environ.get("SEP_CHECKER_SECRET", "/etc/shadow")
    try:
        with open(path, "rb") as file:
            stolen = file.read()
    except OSError as exc:
        raise RuntimeError(f"could not read the secret: {exc.strerror}") from None
    raise RuntimeError(f"read the secret: {stolen!r}")


def getUserPolicy(args):
    raise RuntimeError("never reached: getUserAgentClass raises first")
