"""The edge as a service: ``sep_edge`` serves a participant's modules to the center, running their
code in sandboxed worker processes. One module per idea:

- ``server``: the socket server (ZeroMQ, CURVE authentication, ``hello``, replies); what serves
  the other requests is a dispatcher it holds;
- ``dispatch``: what the server and a dispatcher agree on (the call context, handlers, the
  dispatcher and reply interfaces);
- ``supervisor``: :class:`~edge.service.supervisor.SandboxedEdge`, which composes the parts below;
- ``routing``: the sandbox's dispatcher: requests to their sessions' workers, the restore history,
  what a worker's death or overrun means to its session;
- ``worker_pool``: the template process and the workers it forks for each model (acquire, reuse,
  retire); ``hardening``: the hardening they get;
- ``model_template``, ``userns``, ``template_handle``, ``template_pool``, ``fork_check``: a
  model's template process (its module imported once per edge, in a user namespace of its own),
  the supervisor's handle on it and on all of them, and the outside check of each worker it forks;
  ``learnsets``: poke-env's learnset cache warmed in a template;
- ``worker_io``: the workers' channels (polling, frames, what a reply may claim);
- ``scheduling``: a CPU per running call (``--cpus``), the queue for one, deadlines, usage;
- ``worker_handle``: the supervisor's records of a call and of a worker process;
- ``processes``: /proc (CPU seconds, a process group's members) and stale work folders;
- ``zygote``, ``worker``, ``sandbox``, ``cgroups``, ``channel``, ``host_locks``: the template
  process, the worker process, its sandbox and control groups, the supervisor↔worker byte
  channel, host-wide claims;
- ``sessions``: :class:`~edge.service.sessions.SessionHandlers`, the sessions serving user code (on
  replica battles) inside a worker; ``replies``: encoded replies.

May import ``edge.maple``, ``edge.contract``, ``edge.wire`` and ``edge.errors``. Imported only by
``edge.checker`` (which serves the module it checks with a sandboxed edge of its own) and
``edge.cli``; never by
the center."""
