#!/bin/sh
# After installing or upgrading the .deb or .rpm: let systemd see the unit.
# Nothing is enabled or started: a tunnel needs its config in /etc/braid first
# (see /usr/share/doc/braid/examples and `systemctl enable --now braid@NAME`).
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || :
fi
