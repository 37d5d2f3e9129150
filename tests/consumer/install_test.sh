#!/usr/bin/env bash
# `meson install` into a scratch DESTDIR, then a program built only from the
# installed headers, libraries and pkg-config files (as a user of an installed
# HiSparse would) must compile, link and run.
set -euo pipefail
build_root=$1
src_root=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# `meson test` builds only what the tests need; installing needs every target.
ninja -C "$build_root" >"$work/build.log" 2>&1 || { tail -30 "$work/build.log"; exit 1; }
meson install -C "$build_root" --no-rebuild --destdir "$work/root" >"$work/install.log" 2>&1 || { cat "$work/install.log"; exit 1; }
prefix=$(meson introspect "$build_root" --buildoptions | python3 -c "import json,sys; print(next(o['value'] for o in json.load(sys.stdin) if o['name']=='prefix'))")
pc_dir=$(dirname "$(find "$work/root" -name hisparse.pc | head -1)")
[ -f "$pc_dir/hisparse.pc" ] && [ -f "$pc_dir/hisparse-runtime.pc" ] || { echo "pkg-config files not installed"; exit 1; }
# The .pc files name the final prefix; point them at the DESTDIR copy.
flags=$(PKG_CONFIG_PATH="$pc_dir" PKG_CONFIG_SYSROOT_DIR="$work/root" pkg-config --cflags --libs hisparse)
libdir=$(dirname "$pc_dir")
# A sanitized build's libraries need the sanitizer runtimes linked into the
# program too (ASan must come first); a user would build theirs the same way.
sanitize=$(meson introspect "$build_root" --buildoptions | python3 -c "import json,sys; print(next(o['value'] for o in json.load(sys.stdin) if o['name']=='b_sanitize'))")
san_flags=()
[ "$sanitize" = none ] || san_flags=(-fsanitize="$sanitize")
g++ -std=c++20 "${san_flags[@]}" "$src_root/tests/consumer/main.cpp" -o "$work/consumer" $flags -Wl,-rpath,"$work/root$prefix/lib" -Wl,-rpath,"$libdir"
LD_LIBRARY_PATH="$libdir:${LD_LIBRARY_PATH:-}" "$work/consumer"
