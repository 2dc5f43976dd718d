# xdp2tc: the two commands are `make demo` and `make test`; everything else is a step of theirs.
# On a fresh Debian machine they install what is missing: a Python >= 3.12 virtualenv with the
# package with its test deps and the angr engine (PyPI; angr adds ~25 s to a fresh install),
# and clang/llvm/bpftool/gcc-bpf/libbpf headers (apt-get).

SHELL := /bin/bash
VENV  := .venv
PY    := $(VENV)/bin/python
XDP2TC := $(VENV)/bin/xdp2tc

CLANG        ?= clang-19
LLVM_OBJDUMP ?= llvm-objdump-19
LLVM_OBJCOPY ?= llvm-objcopy-19
BPF_GCC      ?= bpf-gcc
# Debian packages that provide the commands above, plus headers and tools the tests use.
# neovim: the independent LSP client of tests/test_lsp.py (nvim --headless).
APT_PACKAGES := clang-19 llvm-19 bpftool gcc-bpf libbpf-dev libxdp-dev linux-libc-dev iproute2 graphviz neovim

DEMO_OBJ  := corpus/build/clang/thesis_static_rules.o

.PHONY: demo test lint setup system-deps venv bytecode corpus external flowervm clean bench watcher node-deps vscode-check vsix

demo: setup corpus
	$(XDP2TC) info $(DEMO_OBJ)
	$(XDP2TC) disasm --lines $(DEMO_OBJ)
	$(XDP2TC) analyze $(DEMO_OBJ)
	$(XDP2TC) rules $(DEMO_OBJ) --dev eth0
	@echo "# check, the CI gate: it exits 1 when a path stays in software (--fail-on any)"
	-$(XDP2TC) check $(DEMO_OBJ)

test: setup corpus watcher external flowervm lint vscode-check
	$(PY) -m pytest -q --durations=30; rc=$$?; if [ $$rc -eq 5 ]; then echo "pytest collected no tests"; fi; exit $$rc

setup: system-deps venv bytecode

# Every xdp2tc command is a fresh process that imports ~120 of the project's modules: from
# source that is ~0.15 s of compiling per run (xdpfilt_alw_tcp's `rules` 4.3 s, the 48-OR
# stress 1.8 s), paid again each time where PYTHONDONTWRITEBYTECODE is set (as on CI
# machines) or the tree is read-only. compileall writes the bytecode once and redoes only
# what changed; Python checks each cached file against its source's mtime and size.
bytecode: venv
	$(PY) -m compileall -q lifter analyzer rules offload

# Habits the tools keep: ruff (lint + format), the import-linter layers contract
# (lifter -> analyzer -> rules -> offload), configured in pyproject.toml, and no private
# names used across modules (tests/test_private_names.py).
lint: venv
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports
	$(PY) tests/test_private_names.py

# apt-get only when a command is missing, so a ready machine pays nothing.
system-deps:
	@missing=""; \
	for c in $(CLANG) $(LLVM_OBJDUMP) $(LLVM_OBJCOPY) bpftool $(BPF_GCC) tc dot nvim; do \
	  command -v $$c >/dev/null 2>&1 || missing="$$missing $$c"; done; \
	[ -f /usr/include/bpf/bpf_helpers.h ] || missing="$$missing libbpf-dev"; \
	[ -f /usr/include/xdp/parsing_helpers.h ] || missing="$$missing libxdp-dev"; \
	if [ -n "$$missing" ]; then \
	  echo "installing system packages (missing:$$missing)"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $(APT_PACKAGES) >/dev/null || \
	  { echo "error: apt-get could not install $(APT_PACKAGES)" >&2; exit 1; }; \
	fi

# The interpreter: the first Python >= 3.12 among python3.13/python3.12/python3 on PATH and
# pyenv's installed versions.
venv: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	@py=""; \
	cands="python3.13 python3.12 python3"; \
	if command -v pyenv >/dev/null 2>&1; then \
	  for v in $$(pyenv versions --bare 2>/dev/null | sort -rV); do cands="$$cands $$(pyenv root)/versions/$$v/bin/python3"; done; \
	fi; \
	for c in $$cands; do \
	  if command -v $$c >/dev/null 2>&1 && $$c -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then py=$$(command -v $$c); break; fi; \
	done; \
	if [ -z "$$py" ]; then echo "error: xdp2tc needs Python >= 3.12 (angr 10 does); none found on PATH or in pyenv. Install one (e.g. 'pyenv install 3.12') and re-run." >&2; exit 1; fi; \
	echo "using $$py ($$($$py -V))"; \
	[ -x $(PY) ] && $(PY) -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null || { rm -rf $(VENV); $$py -m venv $(VENV); }; \
	$(PY) -m pip install -q --upgrade pip && \
	$(PY) -m pip install -q -e '.[test,angr,lsp]' && touch $@

corpus: system-deps
	$(MAKE) -s -C corpus -j2 CLANG=$(CLANG) BPF_GCC=$(BPF_GCC) LLVM_OBJCOPY=$(LLVM_OBJCOPY)

# sync's map-change watcher (offload/mapwatch.bpf.c): a tracing program of the project's own,
# built like the corpus (clang, BTF for CO-RE) into build/ (ignored).
watcher: build/mapwatch.o

build/mapwatch.o: offload/mapwatch.bpf.c | system-deps
	@mkdir -p $(@D)
	$(CLANG) -O2 -g -target bpf -Wall -Werror -I/usr/include/x86_64-linux-gnu -c $< -o $@.tmp && mv $@.tmp $@

# Compiled XDP objects nobody here wrote (Debian's xdp-tools, libxdp1, xdp-tests), into an
# ignored folder; never committed.
external:
	bash corpus/external.sh

# The cls_flower oracle (offload/flowervm.py): qemu from apt when missing, then Debian's kernel,
# modules, busybox and iproute2 fetched with apt-get download into build/flowervm/ (ignored),
# the initramfs built once per package versions, and the static sender built with gcc.
flowervm: venv
	@missing=""; command -v qemu-system-x86_64 >/dev/null 2>&1 || missing="$$missing qemu-system-x86"; \
	command -v gcc >/dev/null 2>&1 && [ -f /usr/lib/x86_64-linux-gnu/libc.a ] || missing="$$missing gcc libc6-dev"; \
	if [ -n "$$missing" ]; then \
	  echo "installing system packages for the flower VM (missing:$$missing)"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq --no-install-recommends $$missing >/dev/null || \
	  { echo "error: apt-get could not install$$missing" >&2; exit 1; }; \
	fi
	$(PY) -m offload.flowervm fetch

# The VS Code extension (editors/vscode, issue 15): node and npm from apt when missing;
# `npm ci` only when package-lock.json changed (a stamp in node_modules), so a ready machine
# pays nothing; then the type check (tsc --noEmit) and eslint. `make vsix` packages it with
# @vscode/vsce into build/xdp2tc.vsix.
VSCODE := editors/vscode

node-deps:
	@command -v npm >/dev/null 2>&1 || { \
	  echo "installing system packages (missing: npm)"; \
	  SUDO=""; [ "$$(id -u)" = 0 ] || SUDO=sudo; \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq nodejs npm >/dev/null || \
	  { echo "error: apt-get could not install nodejs npm" >&2; exit 1; }; }

$(VSCODE)/node_modules/.ci-stamp: $(VSCODE)/package-lock.json | node-deps
	cd $(VSCODE) && npm ci --no-audit --no-fund --loglevel=error
	touch $@

vscode-check: $(VSCODE)/node_modules/.ci-stamp
	cd $(VSCODE) && ./node_modules/.bin/tsc --noEmit -p . && ./node_modules/.bin/eslint src

vsix: vscode-check
	mkdir -p build
	cd $(VSCODE) && ./node_modules/.bin/tsc -p . && \
	  ./node_modules/.bin/vsce package --allow-missing-repository --skip-license -o ../../build/xdp2tc.vsix

bench: setup corpus watcher external
	$(PY) bench/lift.py
	$(PY) bench/analyze.py

clean:
	$(MAKE) -s -C corpus clean
	rm -rf build .pytest_cache .hypothesis
