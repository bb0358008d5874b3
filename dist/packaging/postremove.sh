#!/bin/sh
# After removing the .deb or .rpm: let systemd forget the unit. Tunnels still
# running keep running until the administrator stops them.
if [ -d /run/systemd/system ]; then
	systemctl daemon-reload >/dev/null 2>&1 || :
fi
