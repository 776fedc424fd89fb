#!/bin/bash
# cross-entropy: the backward rule alone (micro_lsb.py) and the table's rows, after/before interleaved
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1 NUMBA_NUM_THREADS=1
micro() { (cd /tmp/smb/$1 && PYTHONPATH=$PWD /work/venv/bin/python /tmp/smb/micro_lsb.py 2>&1 | head -2 | sed "s/^/$1 /"); }
run() { (cd /tmp/smb/$1 && PYTHONPATH=$PWD /work/venv/bin/python -m benchmarks.traced.table --device cpu --out /tmp/smb/tables_ce/$1$2 --repeats 3 --budget 900 --only cross_entropy --sizes realistic > /tmp/smb/tables_ce/$1$2.log 2>&1); }
mkdir -p /tmp/smb/tables_ce
for k in 1 2 3; do date -u +%H:%M:%S; micro after2; micro before2; done
for k in 1 2; do date -u +%H:%M:%S; run after2 $k; run before2 $k; done
date -u +%H:%M:%S; echo done
