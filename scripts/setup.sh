#!/usr/bin/env bash
# Installs what building toolplan needs beyond the Rust toolchain: cmake and libclang (the in-process
# llama.cpp model is compiled from source by the `llama-cpp-sys-2` crate) and a C++ compiler.
# Idempotent: installs only what is missing. Needs root (or sudo) for apt-get on Debian/Ubuntu.
#
#   bash scripts/setup.sh
set -euo pipefail

missing=()
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
command -v c++ >/dev/null 2>&1 || missing+=(g++)
# bindgen needs libclang.so itself (libclang-cpp, which some images ship, is not enough); Debian's
# libclang-dev provides it.
if ! ls /usr/lib/llvm-*/lib/libclang.so* /usr/lib/llvm-*/lib/libclang-[0-9]*.so* >/dev/null 2>&1 \
  && ! ldconfig -p 2>/dev/null | grep -qE 'libclang(-[0-9.]+)?\.so'; then
  missing+=(libclang-dev)
fi
command -v python3 >/dev/null 2>&1 || missing+=(python3 python3-pip)
# The Python package's Rust unit tests (bindings/python) link against libpython: python3-dev.
if ! python3 -c 'import os, sys, sysconfig as s; d, l = s.get_config_var("LIBDIR"), s.get_config_var("LDLIBRARY"); sys.exit(not (d and l and os.path.exists(os.path.join(d, l))))' 2>/dev/null; then
  missing+=(python3-dev)
fi
# The --confirm tests run toolplan on a pseudo-terminal (script) and in a session without one
# (setsid).
command -v script >/dev/null 2>&1 || missing+=(bsdutils)
command -v setsid >/dev/null 2>&1 || missing+=(util-linux)

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: build dependencies present" >&2
  exit 0
fi
echo "setup: installing ${missing[*]}" >&2
if [ "$(id -u)" -eq 0 ]; then
  sudo=()
elif command -v sudo >/dev/null 2>&1; then
  sudo=(sudo)
else
  echo "setup: error: need root to install ${missing[*]} (apt-get install -y ${missing[*]})" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
echo "setup: done" >&2
