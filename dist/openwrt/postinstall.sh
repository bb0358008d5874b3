#!/bin/sh
# After installing the .ipk on a running router (not while building an image,
# where IPKG_INSTROOT is set): enable the service; it starts a tunnel per
# /etc/braid/*.toml, none until one is written.
[ -n "$IPKG_INSTROOT" ] && exit 0
/etc/init.d/braid enable
exit 0
