"""The event taxonomy: categories, their subcategories, and severities."""

from __future__ import annotations

from enum import StrEnum


class Severity(StrEnum):
    INFO = "info"
    WARNING = "warning"
    ERROR = "error"
    CRITICAL = "critical"


#: The seed taxonomy from the design; subcategories are suggestions, not a closed list.
CATEGORIES: dict[str, tuple[str, ...]] = {
    "conversation": ("user_request", "agent_response", "clarification", "turn", "flush", "note"),
    "system.package": ("install", "remove", "upgrade", "rollback", "search"),
    "system.config": ("nixos_option", "edit", "rebuild", "generation"),
    "system.service": ("start", "stop", "restart", "fail", "status_change"),
    "system.process": ("spawn", "crash", "oom_kill", "high_cpu", "high_mem", "exit"),
    "system.network": ("connect", "disconnect", "dns_fail", "firewall_change", "address_change",
                       "listen", "unlisten"),
    "system.storage": ("mount", "unmount", "space_warning", "permission", "inode_warning",
                       "reclaimable"),
    "system.hardware": ("usb_attach", "usb_detach", "gpu_change", "sensor_alert", "battery"),
    # Memory, swap, PSI stalls or load past a threshold (the pressure watcher), and back.
    "system.pressure": ("memory", "swap", "cpu", "io", "load", "recovered"),
    # Container lifecycle, health and disk use of podman and docker (the containers watcher).
    "system.container": ("start", "stop", "exit", "die", "oom", "health", "disk"),
    "diagnosis": ("investigation", "root_cause", "resolution", "workaround"),
    "file": ("create", "modify", "delete", "move", "permission_change"),
    "approval": ("requested", "granted", "denied"),
    # The security watcher's (auth log, firewall) and the sessions watcher's (login, logout).
    "security": ("login", "logout", "sudo", "sudo_failure", "su", "su_failure", "auth_failure",
                 "account_locked", "user_added", "user_removed", "user_modified", "group_added",
                 "group_removed", "group_modified", "group_membership", "password_change",
                 "firewall", "capability_grant", "sandbox_violation"),
    "error": ("application", "system", "kernel", "agent"),
    "cron": ("scheduled", "executed", "failed", "skipped"),
    # `correction`: the user correcting what was said ("actually, it's port 6543"), derived from
    # their turn as a stated `preference` is (the recall API's core/conclusions.py).
    "user_pattern": ("work_session", "preference", "habit", "correction"),
    # What the agent itself did to the machine, fed from the hash-chained ledger
    # (docs/design.md §12); the subcategory is the ledger entry's action.
    "agent.action": ("command.run", "file.write", "file.delete", "service.restart",
                     "package.install", "config.edit"),
}

DEFAULT_CATEGORY = "conversation"


#: A container engine's `disk` report advises pruning a kind of its storage (images, containers,
#: volumes, build cache) from this much reclaimable space; under it the report says "nothing
#: reclaimable". Written by the containers watcher, read by recall (a report with less is no
#: answer to what can be cleaned).
CONTAINER_DISK_ADVISED_BYTES = 1_000_000
