"""The supervisor: the sandboxed edge put together, the router and restore history, the worker and
model template pools, CPU scheduling and deadlines, the workers' channels, host-wide claims and
memory admission. It never imports user code; the top of the service."""
