"""A worker's sandbox: its limits and their options, the hardening the host allows, seccomp, user
namespaces, control groups, the fork check, and where the edge's own processes may import from.
Knows no session, server or supervisor: the bottom of the service."""
