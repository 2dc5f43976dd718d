#!/bin/bash
# Fetch real-world XDP/eBPF objects from Debian packages into corpus/external/.
#
#   corpus/external.sh            (also: make -C corpus external)
#
# For each package in PACKAGES: `apt-get download` the .deb into a temp dir
# (running `apt-get update` once only if the first download fails), unpack it
# with `dpkg-deb -x`, and copy every *.o that is an eBPF ELF (e_machine 247)
# to corpus/external/<package>/<name>.o.  Idempotent: a package whose
# directory already holds a .stamp file is skipped.  Exit status != 0 with a
# clear message when apt cannot provide a package.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
DEST=$HERE/external
PACKAGES=${PACKAGES:-"xdp-tools libxdp1 xdp-tests"}

is_bpf_elf() { # 1: file -> 0 if ELF with e_machine == 247 (EM_BPF)
	python3 - "$1" <<'EOF'
import struct, sys
with open(sys.argv[1], "rb") as f:
    h = f.read(20)
ok = len(h) == 20 and h[:4] == b"\x7fELF"
if ok:
    fmt = "<H" if h[5] == 1 else ">H"
    ok = struct.unpack_from(fmt, h, 18)[0] == 247
sys.exit(0 if ok else 1)
EOF
}

TMP=$(mktemp -d /tmp/xdp2tc_external.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
updated=0

download() { # 1: package -> .deb in $TMP/debs
	mkdir -p "$TMP/debs"
	if (cd "$TMP/debs" && apt-get download "$1") >"$TMP/apt.log" 2>&1; then
		return 0
	fi
	if [ $updated -eq 0 ]; then
		echo "apt-get download $1 failed; running apt-get update once" >&2
		updated=1
		if apt-get update >"$TMP/update.log" 2>&1 &&
			(cd "$TMP/debs" && apt-get download "$1") >"$TMP/apt.log" 2>&1; then
			return 0
		fi
	fi
	echo "error: apt-get download $1 failed:" >&2
	cat "$TMP/apt.log" >&2
	return 1
}

for pkg in $PACKAGES; do
	out=$DEST/$pkg
	if [ -f "$out/.stamp" ]; then
		echo "$pkg: already fetched ($(find "$out" -name '*.o' | wc -l) objects)"
		continue
	fi
	download "$pkg" || exit 1
	deb=$(ls "$TMP/debs/${pkg}"_*.deb | head -n 1)
	root=$TMP/root-$pkg
	mkdir -p "$root"
	dpkg-deb -x "$deb" "$root"
	mkdir -p "$out"
	n=0
	while IFS= read -r -d '' obj; do
		is_bpf_elf "$obj" || continue
		name=$(basename "$obj")
		if [ -e "$out/$name" ] && ! cmp -s "$obj" "$out/$name"; then
			# same basename from two directories: keep both, disambiguated
			name=$(basename "$(dirname "$obj")")_$name
		fi
		cp "$obj" "$out/$name"
		n=$((n + 1))
	done < <(find "$root" -name '*.o' -type f -print0 | sort -z)
	basename "$deb" >"$out/.stamp"
	echo "$pkg: $n eBPF objects from $(basename "$deb")"
done
