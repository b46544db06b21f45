"""The watchers' I/O with the host: subprocesses, device files, sockets. `core/` decides what is
news from what these return; keeping the two apart lets core/ be tested with recorded output."""
