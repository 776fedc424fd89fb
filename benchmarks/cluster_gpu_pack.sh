#!/usr/bin/env bash
# Build .raypack/ray-site.tar.xz: Ray and the dependencies the GPU image lacks, for
# CPython 3.12 on x86-64, slimmed so that it can travel with the working tree
# (benchmarks/cluster_gpu.sh unpacks it where `import ray` fails).
# Usage (in the repository root, with pip access):  bash benchmarks/cluster_gpu_pack.sh [RAY_VERSION]
set -euo pipefail
ver=${1:-2.60.0}
grep -qx '/.raypack/' .git/info/exclude 2>/dev/null || echo /.raypack/ >> .git/info/exclude
tmp=$(mktemp -d)
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d "$tmp/whl" "ray==$ver" jsonschema jsonschema-specifications referencing rpds-py
mkdir -p "$tmp/site" .raypack
for w in "$tmp"/whl/*.whl; do (cd "$tmp/site" && unzip -q -o "$w"); done
# Java, the dashboard's web build and the libraries on top of Ray core: not used here
rm -rf "$tmp"/site/ray/{jars,rllib,data,serve,tune,train} "$tmp"/site/ray/dashboard/client/build
(cd "$tmp/site" && tar -cf - . | xz -6 -T0 > "$OLDPWD/.raypack/ray-site.tar.xz")
rm -rf "$tmp"
ls -la .raypack
