#!/bin/sh
# build.sh: build Legion's distribution packages (.deb, .rpm, Arch) into
# $DIST. `make package` runs it.
#
#   packaging/build.sh                 build the packages
#   packaging/build.sh version DESC    print the package version for the git
#                                      describe output DESC, and exit
#
# Steps: build the binaries legion, legion-pty-worker and legion-kube (static,
# -trimpath; the worker goes to /usr/libexec/legion); stage the static user units
# (`legion install --packaged --bin /usr/bin/legion`), the man pages
# (`legion docs`, gzipped) and completions, README.md and the documented
# legion.toml; run nfpm (pinned, from the Go module proxy) once per format
# on packaging/nfpm.yaml.
#
# Environment (all optional):
#   VERSION            git describe output (default: run git describe)
#   COMMIT             short commit (default: git rev-parse --short HEAD)
#   DIST               output directory (default: dist)
#   GO                 the go command (default: go)
#   PACKAGERS          formats (default: "deb rpm archlinux")
#   SOURCE_DATE_EPOCH  file times and man page dates (default: the last
#                      commit's time), for reproducible packages
#   LEGION_MAINTAINER  the packages' maintainer field
set -eu

NFPM=github.com/goreleaser/nfpm/v2/cmd/nfpm@v2.44.2

# pkg_version turns git describe output into a version all three formats
# accept: it starts with a digit and holds no '-' (rpm and Arch use '-'
# to separate the release). What follows the tag goes after a '+':
#   v1.2.3                  -> 1.2.3
#   v1.2.3-4-gabc1234-dirty -> 1.2.3+4.gabc1234.dirty
#   abc1234 (no tag yet)    -> 0.0.0+abc1234
#   1234abc-dirty           -> 0.0.0+1234abc.dirty
#   dev                     -> 0.0.0+dev
pkg_version() {
	v=${1#v}
	base=${v%%-*}
	case $1 in
	v[0-9]* | [0-9]*.*) # a tag: v1, v1.2.3, 1.2
		rest=${v#"$base"}
		;;
	*) # a bare commit hash (it may start with a digit) or "dev"
		base=0.0.0
		rest=-$1
		;;
	esac
	rest=$(printf '%s' "$rest" | tr -- '-' '.')
	rest=${rest#.}
	if [ -n "$rest" ]; then
		out=$base+$rest
	else
		out=$base
	fi
	case $out in
	*[!A-Za-z0-9.+~_]*)
		echo "build.sh: version \"$1\" gives \"$out\"; want letters, digits and . + ~ _ only" >&2
		return 1
		;;
	esac
	printf '%s\n' "$out"
}

if [ "${1:-}" = version ]; then
	[ $# -eq 2 ] || { echo "usage: build.sh version DESCRIBE" >&2; exit 2; }
	pkg_version "$2"
	exit
fi
[ $# -eq 0 ] || { echo "usage: build.sh [version DESCRIBE]" >&2; exit 2; }

cd "$(dirname "$0")/.."
GO=${GO:-go}
DIST=${DIST:-dist}
PACKAGERS=${PACKAGERS:-deb rpm archlinux}
VERSION=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
COMMIT=${COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)}
if [ -z "${SOURCE_DATE_EPOCH:-}" ]; then
	SOURCE_DATE_EPOCH=$(git log -1 --format=%ct 2>/dev/null || date +%s)
fi
export SOURCE_DATE_EPOCH
LEGION_VERSION=$(pkg_version "$VERSION")
LEGION_ARCH=$("$GO" env GOARCH)
LEGION_MAINTAINER=${LEGION_MAINTAINER:-Legion developers <legion-dev@users.noreply.github.com>}
export LEGION_VERSION LEGION_ARCH LEGION_MAINTAINER

LEGION_STAGE=$(mktemp -d "${TMPDIR:-/tmp}/legion-pkg.XXXXXX")
export LEGION_STAGE
trap 'rm -rf "$LEGION_STAGE"' EXIT

echo "build.sh: legion $LEGION_VERSION ($VERSION, commit $COMMIT) for $LEGION_ARCH" >&2
CGO_ENABLED=0 "$GO" build -trimpath \
	-ldflags "-X main.version=$VERSION -X main.commit=$COMMIT -X github.com/legion-dev/legion/ptyworker/proto.LibexecDir=/usr/libexec/legion" \
	-o "$LEGION_STAGE/" ./cmd/legion ./cmd/legion-pty-worker ./cmd/legion-kube
"$LEGION_STAGE/legion" install --packaged --unit-dir "$LEGION_STAGE/units" --bin /usr/bin/legion >/dev/null
"$LEGION_STAGE/legion" docs --man "$LEGION_STAGE/man" --completions "$LEGION_STAGE/completions"
gzip -9n "$LEGION_STAGE"/man/man1/*.1 "$LEGION_STAGE"/man/man5/*.5
cp README.md legion.toml "$LEGION_STAGE/"
# Staged files keep their modes in the packages only where nfpm.yaml
# does not set them; make them right regardless.
chmod 0755 "$LEGION_STAGE/legion" "$LEGION_STAGE/legion-pty-worker" "$LEGION_STAGE/legion-kube"

mkdir -p "$DIST"
for p in $PACKAGERS; do
	# nfpm is its own module: the caller's GOFLAGS (-mod=vendor, tags)
	# and a go.work must not reach its build.
	GOFLAGS= GOWORK=off "$GO" run "$NFPM" package \
		--config packaging/nfpm.yaml --packager "$p" --target "$DIST/"
done
