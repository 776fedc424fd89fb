#!/usr/bin/env bash
# Build the Fortran + cuDNN conv2d library and its two layout-trap variants.
#
#   examples/fortran_cudnn/build.sh [OUT_DIR]      (default: build/fortran_cudnn)
#
# Needs gfortran only: CUDA and cuDNN are loaded at run time (dlopen). The GNU
# Fortran runtime is copied beside the libraries (found through $ORIGIN), so the
# folder runs on a machine without gfortran.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-build/fortran_cudnn}"
mkdir -p "$out"
for variant in "" LAYOUT_TRAP LAYOUT_TRAP_GRAD; do
  name="libconv2d_cudnn${variant:+_$(echo "$variant" | tr 'A-Z' 'a-z')}.so"
  gfortran -O2 -cpp -shared -fPIC -J "$out" ${variant:+-D$variant} \
    -Wl,-rpath,'$ORIGIN' "$here/conv2d_cudnn.F90" -o "$out/$name"
done
for lib in libgfortran.so.5 libquadmath.so.0; do
  src="$(gfortran -print-file-name="$lib")"
  [ -f "$src" ] && cp -L "$src" "$out/"
done
ls "$out"
