"""A sandboxed worker: its process, its sessions and the spec it is started with. Imports the
endpoints' worker side, the sandbox, the channel and the server's dispatch types and replies,
never a supervision or forking module."""
