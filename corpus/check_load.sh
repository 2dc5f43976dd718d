#!/bin/bash
# Load every built corpus object into the running kernel and report pass/fail.
#
#   corpus/check_load.sh                 every object `make -C corpus list` names
#                                        (missing ones count as FAIL, stale extra
#                                        files in build/ are ignored)
#   corpus/check_load.sh PATH...         given objects and/or directories
#
# Needs root (CAP_BPF + CAP_NET_ADMIN) and bpftool.  Nothing is attached:
# objects are loaded with `bpftool prog loadall` into a private bpffs
# directory that is removed right after.  Section names libbpf does not know
# (legacy names such as "prog", "xdp/<name>") are retried with `type xdp`.
# Objects with a legacy SEC("maps") section, which libbpf >= 1.0 refuses,
# are loaded with corpus/legacy_load.py instead; so are objects bpftool cannot
# load as a whole (XDP and tc programs together, sections without FUNC symbols).
#
# Expected failures: a source line `// load-<toolchain>: no REASON` (e.g.
# `// load-gcc: no ...`) marks that toolchain's objects of that source as
# XFAIL; they are still tried, and an unexpected success is reported XPASS.
#
# Output: one line per object "PASS|FAIL|XFAIL|XPASS <path> [reason]", then a
# summary.  Exit status 1 if any FAIL (or XPASS), else 0.
set -u

HERE=$(cd "$(dirname "$0")" && pwd)
BPFTOOL=${BPFTOOL:-bpftool}
PYTHON=${PYTHON:-python3}
VERBOSE=${VERBOSE:-0}

if ! mount | grep -q ' /sys/fs/bpf type bpf'; then
	mount -t bpf bpf /sys/fs/bpf || { echo "cannot mount bpffs at /sys/fs/bpf" >&2; exit 2; }
fi

PIN=/sys/fs/bpf/xdp2tc_chk_$$
LOG=$(mktemp /tmp/xdp2tc_chk.XXXXXX)
cleanup() { rm -rf "$PIN"; rm -f "$LOG"; }
trap cleanup EXIT

objs=()
if [ $# -eq 0 ]; then
	while IFS= read -r o; do objs+=("$HERE/$o"); done < <(make -s -C "$HERE" list)
fi
for p in "$@"; do
	if [ -d "$p" ]; then
		while IFS= read -r o; do objs+=("$o"); done < <(find "$p" -name '*.o' | sort)
	else
		objs+=("$p")
	fi
done
if [ ${#objs[@]} -eq 0 ]; then
	echo "no objects found (run make -C corpus first)" >&2
	exit 2
fi

# Source stem for an object: build/<tc>/<stem>[_<variant>].o -> <stem>.c
source_of() {
	local base
	base=$(basename "$1" .o)
	while [ -n "$base" ]; do
		[ -f "$HERE/$base.c" ] && { echo "$HERE/$base.c"; return; }
		case "$base" in *_*) base=${base%_*} ;; *) return ;; esac
	done
}

xfail_reason() { # $1 object -> prints reason if a `// load-<tc>: no` directive applies
	local src tc
	src=$(source_of "$1")
	[ -n "$src" ] || return
	tc=$(basename "$(dirname "$1")")
	sed -n "s|^// load-$tc: no[[:space:]]*||p" "$src" | head -n 1
}

# libbpf auto-pins maps declared with LIBBPF_PIN_BY_NAME (e.g. the xdp-filter
# objects in external/) directly under /sys/fs/bpf.  Remove such pins if they
# appeared during our load and are named like a symbol of the object; pins
# that existed before are reused by libbpf and left alone.
unpin_new() { # $1 object, $2 listing of /sys/fs/bpf before the load
	local name
	for name in $(ls /sys/fs/bpf); do
		grep -qxF "$name" <<<"$2" && continue
		if llvm-readelf-19 -s "$1" 2>/dev/null | awk '{print $NF}' | grep -qxF "$name"; then
			rm -f "/sys/fs/bpf/$name"
		fi
	done
}

try_load() { # $1 object; returns 0 on success, log in $LOG
	local o=$1 before rc
	before=$(ls /sys/fs/bpf)
	try_load_inner "$o"
	rc=$?
	unpin_new "$o" "$before"
	return $rc
}

try_load_inner() {
	local o=$1
	if llvm-readelf-19 -S "$o" 2>/dev/null | grep -qE '\] maps[[:space:]]'; then
		"$PYTHON" "$HERE/legacy_load.py" "$o" >"$LOG" 2>&1
		return
	fi
	rm -rf "$PIN"
	if "$BPFTOOL" prog loadall "$o" "$PIN" >"$LOG" 2>&1 && loaded_some; then
		rm -rf "$PIN"
		return 0
	fi
	rm -rf "$PIN"
	if "$BPFTOOL" prog loadall "$o" "$PIN" type xdp >>"$LOG" 2>&1 && loaded_some; then
		rm -rf "$PIN"
		return 0
	fi
	rm -rf "$PIN"
	# XDP and tc programs in one object (bpftool sets one type for all), or sections
	# without FUNC symbols (libbpf >= 1.0 finds no program in them): load each alone.
	"$PYTHON" "$HERE/legacy_load.py" "$o" >>"$LOG" 2>&1
}

loaded_some() { # bpftool "succeeds" on an object in which libbpf found no program
	[ -n "$(ls -A "$PIN" 2>/dev/null)" ]
}

pass=0 fail=0 xfail=0 xpass=0
for o in "${objs[@]}"; do
	reason=$(xfail_reason "$o")
	if [ ! -f "$o" ]; then
		echo "FAIL  $o (not built)"
		fail=$((fail + 1))
		continue
	fi
	if try_load "$o"; then
		if [ -n "$reason" ]; then
			echo "XPASS $o (expected failure: $reason)"
			xpass=$((xpass + 1))
		else
			echo "PASS  $o"
			pass=$((pass + 1))
		fi
	else
		if [ -n "$reason" ]; then
			echo "XFAIL $o ($reason)"
			xfail=$((xfail + 1))
		else
			echo "FAIL  $o"
			grep -vE '^libbpf: (elf: skipping|prog .*missing .BTF.ext)|^Warning: bpftool is now running|^If it used to work' "$LOG" | tail -n 15 | sed 's/^/      /'
			fail=$((fail + 1))
		fi
		[ "$VERBOSE" = 1 ] && sed 's/^/      /' "$LOG"
	fi
done

echo "summary: $pass pass, $fail fail, $xfail xfail, $xpass xpass (of ${#objs[@]})"
[ $fail -eq 0 ] && [ $xpass -eq 0 ]
