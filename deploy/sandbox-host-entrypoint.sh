#!/bin/sh
# The sandbox host's entry point: make the container's cgroup v2 tree usable for the
# sandboxes' limits (memory, pids, cpu), then run the given command.
#
# Docker mounts /sys/fs/cgroup read-only in a container that is not privileged, and cgroup
# v2 lets a cgroup hand controllers to its children only when no process sits in it ("no
# internal processes"). So: remount it read-write (needs CAP_SYS_ADMIN, granted in
# compose.yaml), move this process into a leaf of its own, then enable the controllers for
# the subtree Burrow creates its sandboxes' cgroups in (burrow/sandbox/cgroups.py).
set -eu
cg=/sys/fs/cgroup
if [ -f "$cg/cgroup.controllers" ]; then
    mount -o remount,rw "$cg" 2>/dev/null || true
    if [ -w "$cg/cgroup.procs" ]; then
        mkdir -p "$cg/init"
        echo $$ > "$cg/init/cgroup.procs"
        for c in memory pids cpu; do
            echo "+$c" > "$cg/cgroup.subtree_control" 2>/dev/null || true
        done
    else
        echo "sandbox-host: $cg is not writable: sandboxes run without limits" \
             "(set BURROW_SANDBOX_LIMITS=false to say so explicitly)" >&2
    fi
fi
exec "$@"
