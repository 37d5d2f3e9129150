#!/usr/bin/env bash
# Configures, builds and runs tests/consumer with this checkout as its
# `hisparse` subproject, in a scratch folder. Host-only (-Dhisparse:cuda=disabled)
# keeps it quick; the GPU build is covered by the main build.
set -euo pipefail
src_root=$(cd "$1" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$src_root/tests/consumer/meson.build" "$src_root/tests/consumer/main.cpp" "$work/"
mkdir -p "$work/subprojects"
ln -s "$src_root" "$work/subprojects/hisparse"
meson setup "$work/build" "$work" -Dhisparse:cuda=disabled >"$work/setup.log" 2>&1 || { cat "$work/setup.log"; exit 1; }
ninja -C "$work/build" >"$work/build.log" 2>&1 || { tail -50 "$work/build.log"; exit 1; }
"$work/build/consumer"
