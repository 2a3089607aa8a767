# Shared by ops/ scripts: the package list and the build.
# shellcheck shell=bash

# Everything lockstep needs to build, test and run on Debian 12. The README
# gives the same list; configure names the package of anything missing.
LOCKSTEP_PACKAGES=(
	gcc make autoconf automake pkg-config
	libev-dev libprotobuf-c-dev protobuf-c-compiler
	libnl-3-dev libnl-route-3-dev libinih-dev libxxhash-dev liburing-dev libsodium-dev libzstd-dev check
	clang python3 iproute2 procps tshark nftables gnuplot-nox
)

ops_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

say() { printf '%s: %s\n' "${0##*/}" "$*"; }

# Where every ops/ script finds the built binaries: $LOCKSTEP_BIN, else the
# build ops/quickstart and ops/check make (_build/check), else $PATH (an
# installed lockstep). `bin NAME` prints the path of one, or fails saying
# how to get it; `bindir` prints the folder the first of them is in.
bin() {
	local d
	for d in ${LOCKSTEP_BIN:+"$LOCKSTEP_BIN"} "$ops_root/_build/check"; do
		if [ -x "$d/$1" ]; then
			echo "$d/$1"
			return 0
		fi
	done
	command -v "$1" 2>/dev/null && return 0
	printf '%s: %s not built (run ops/quickstart or ops/check, or set LOCKSTEP_BIN)\n' \
		"${0##*/}" "$1" >&2
	return 2
}
bindir() {
	local b
	b=$(bin lockstep-sequencer) || return 2
	dirname "$b"
}
die() { printf '%s: error: %s\n' "${0##*/}" "$*" >&2; exit 1; }

# no_leak_scan COMMAND...: COMMAND (a lockstepctl status or stats of a poll,
# asked again and again until something holds) without LeakSanitizer's scan
# at its exit, where the binaries are built with AddressSanitizer (ops/check's
# second build): the scan costs about 80 ms of CPU a call there, four times
# the rest of the call, and polls are most of a test run's lockstepctl
# calls. The same requests made once, outside a poll, keep the scan.
no_leak_scan() { ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 "$@"; }

# Installs what is missing (as root, with apt-get), or says what to install.
ensure_packages() {
	local missing=() p
	for p in "${LOCKSTEP_PACKAGES[@]}"; do
		dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
	done
	[ ${#missing[@]} -eq 0 ] && return 0
	if [ "$(id -u)" -ne 0 ]; then
		die "missing packages: ${missing[*]} (run as root, or: sudo apt-get install ${missing[*]})"
	fi
	say "installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# bootstrap: autoreconf once per change of the build files.
bootstrap() {
	(cd "$ops_root" && autoreconf -fi >/dev/null 2>&1) || (cd "$ops_root" && autoreconf -fi)
}

# build DIR [configure flags...]: an out-of-tree build in $ops_root/_build/DIR.
build() {
	local dir=$ops_root/_build/$1
	shift
	mkdir -p "$dir"
	(cd "$dir" && "$ops_root/configure" -q "$@" && make -j"$(nproc)" -s)
}
