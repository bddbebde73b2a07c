#!/bin/sh
# busybox-rootfs.sh OUT.tar: a minimal root filesystem (busybox-static and
# its applets, /etc/passwd and /etc/group, /tmp) as a tar, for an engine to
# import as an image without any registry. Needs busybox-static.
set -eu
OUT=${1:?usage: busybox-rootfs.sh OUT.tar}
BUSYBOX=$(command -v busybox) ||
	{ echo "busybox-rootfs: busybox is not installed (apt-get install busybox-static)" >&2; exit 1; }
R=$(mktemp -d "${TMPDIR:-/tmp}/sbfs-rootfs.XXXXXX")
trap 'rm -rf "$R"' EXIT
mkdir -p "$R/bin" "$R/etc" "$R/tmp" "$R/root" "$R/proc" "$R/sys" "$R/dev" "$R/usr"
cp "$BUSYBOX" "$R/bin/busybox"
for a in $("$R/bin/busybox" --list); do
	[ "$a" = busybox ] || ln -sf busybox "$R/bin/$a"
done
ln -s ../bin "$R/usr/bin"
ln -s bin "$R/sbin"
ln -s ../bin "$R/usr/sbin"
printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n' >"$R/etc/passwd"
printf 'root:x:0:\nnogroup:x:65534:\n' >"$R/etc/group"
chmod 1777 "$R/tmp"
tar -C "$R" -cf "$OUT" .
