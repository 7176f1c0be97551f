#!/bin/sh
# verify-units.sh ROOT: `systemd-analyze --user verify` the user units of an
# unpacked package (ROOT/usr/lib/systemd/user/legion*) as if the package
# were installed: ROOT/usr is laid over /usr, so the units sit in
# /usr/lib/systemd/user and their ExecStart=/usr/bin/legion is the
# package's binary. Templates are verified through an instance
# (legion@verify.service). Prints what systemd-analyze prints and exits
# with its status; a caller wanting "no warnings" checks that stderr is
# empty (unknown keys only warn).
#
# Why an overlay: verify checks that ExecStart's binary exists and is
# executable, on the host's paths. systemd 252 cannot verify user units
# under another root (--root with --user fails: "Failed to initialize unit
# search paths"), and rewriting ExecStart would verify other files than the
# package's.
#
# The overlay is mounted only in a private mount namespace (the script
# re-executes itself under `unshare --mount`, and refuses to mount unless
# its namespace differs from its parent's), so the host's /usr is never
# touched and the mount goes when the script exits. Needs root (or
# CAP_SYS_ADMIN), unshare (util-linux) and overlayfs.
set -eu

usage() { echo "usage: verify-units.sh ROOT" >&2; exit 2; }

if [ "${1:-}" != --in-namespace ]; then
	[ $# -eq 1 ] || usage
	[ -d "$1/usr/lib/systemd/user" ] || { echo "verify-units.sh: $1/usr/lib/systemd/user: no such directory" >&2; exit 1; }
	LEGION_VERIFY_PARENT_NS=$(readlink /proc/self/ns/mnt)
	export LEGION_VERIFY_PARENT_NS
	exec unshare --mount --propagation private -- "$0" --in-namespace "$1"
fi
[ $# -eq 2 ] || usage
if [ "$(readlink /proc/self/ns/mnt)" = "${LEGION_VERIFY_PARENT_NS:-}" ] || [ -z "${LEGION_VERIFY_PARENT_NS:-}" ]; then
	echo "verify-units.sh: not in a mount namespace of its own; refusing to mount over /usr" >&2
	exit 1
fi

root=$(cd "$2" && pwd -P)
case $root in
*[:,]*) echo "verify-units.sh: $root: overlayfs cannot take a path with ':' or ','" >&2; exit 1 ;;
esac
mount -t overlay legion-verify -o "lowerdir=$root/usr:/usr" /usr

runtime=$(mktemp -d "${TMPDIR:-/tmp}/legion-verify.XXXXXX")
trap 'rm -rf "$runtime"' EXIT
chmod 0700 "$runtime"

cd /usr/lib/systemd/user
set --
for f in "$root"/usr/lib/systemd/user/legion*; do
	[ -f "$f" ] || continue
	name=${f##*/}
	case $name in
	*@.*) name=${name%%@.*}@verify.${name#*@.} ;;
	esac
	set -- "$@" "$name"
done
[ $# -gt 0 ] || { echo "verify-units.sh: no legion* units in $root/usr/lib/systemd/user" >&2; exit 1; }
echo "verify-units.sh: systemd-analyze --user verify $*"
status=0
XDG_RUNTIME_DIR=$runtime systemd-analyze --user verify "$@" || status=$?
exit $status
