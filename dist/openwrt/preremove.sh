#!/bin/sh
# Before removing the .ipk: stop the tunnels and disable the service.
[ -n "$IPKG_INSTROOT" ] && exit 0
/etc/init.d/braid stop
/etc/init.d/braid disable
exit 0
