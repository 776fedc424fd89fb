#!/bin/bash
# interleaved table runs of the softmax rows: warm-ups (numba compiles into each tree's cache), then after/before x3
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 NUMBA_NUM_THREADS=1
run() { (cd /tmp/smb/$1 && PYTHONPATH=$PWD /work/venv/bin/python -m benchmarks.traced.table --device cpu --out /tmp/smb/tables/$1$2 --repeats 5 --budget 500 --only softmax --sizes realistic > /tmp/smb/tables/$1$2.log 2>&1); }
mkdir -p /tmp/smb/tables
run after 0; run before 0
for k in 1 2 3; do date -u +%H:%M:%S; run after $k; run before $k; done
date -u +%H:%M:%S
echo done
