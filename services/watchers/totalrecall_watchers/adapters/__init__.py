"""The watchers' I/O with the host, one module per source: psutil, /proc and sysfs, device files
and sockets, subprocesses (systemctl, journalctl, the container engines, nft), log tails, the
spool and NATS; and the watchers that are mostly following a source. `core/` decides what is news
from what these return; keeping the two apart lets core/ be tested with recorded output."""
