#!/usr/bin/env bash
# Build the registry-free sandbox test image: a busybox-static rootfs fed to `docker import`.
# Usage: scripts/build_test_image.sh [image-tag]   (DOCKER_HOST selects the engine; default tag rh-busybox:test)
set -euo pipefail
TAG="${1:-rh-busybox:test}"
if docker image inspect "$TAG" >/dev/null 2>&1; then
  echo "image $TAG already present"
  exit 0
fi
BUSYBOX=/bin/busybox
if [ ! -x "$BUSYBOX" ]; then
  echo "missing $BUSYBOX: apt-get install busybox-static" >&2
  exit 1
fi
ROOT=$(mktemp -d)
trap 'rm -rf "$ROOT"' EXIT
mkdir -p "$ROOT/bin" "$ROOT/etc" "$ROOT/root" "$ROOT/tmp" "$ROOT/work"
# /tmp must be 1777 in the image: a tmpfs on /tmp copies the image directory's mode.
chmod 1777 "$ROOT/tmp" "$ROOT/work"
cp "$BUSYBOX" "$ROOT/bin/busybox"
for applet in $("$BUSYBOX" --list); do
  # `busybox --list` names busybox itself; linking it would make bin/busybox a symlink loop.
  [ "$applet" = busybox ] || ln -s busybox "$ROOT/bin/$applet"
done
printf 'root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000:user:/tmp:/bin/sh\n' > "$ROOT/etc/passwd"
printf 'root:x:0:\nuser:x:1000:\n' > "$ROOT/etc/group"
tar -C "$ROOT" -c . | docker import --change 'CMD ["/bin/sh"]' --change 'ENV PATH=/bin' - "$TAG" >/dev/null
echo "built $TAG"
