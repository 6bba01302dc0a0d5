"""The processes that fork workers: the edge's zygote and each model's template, their fork server,
what they warm before forking, and the supervisor's handles on them. Imports the worker, the
endpoints, the sandbox and the server's dispatch types, never the supervision."""
