"""numoracle's benchmark harness: soundness sweeps, the bug zoo, costs, speed and
calibration as a few parameterised commands.

    python -m benchmarks --help
    python -m benchmarks sweep --ops linear,matmul --targets numpy-fp32 --examples 2000 --out DIR
    python -m benchmarks zoo --ops linear --out DIR

Every module of :mod:`benchmarks.commands` that defines ``add_parser(subparsers)``
is a subcommand: adding a benchmark is adding its module. A command writes its
results under ``--out`` (``benchmarks/results/<area>/...`` for the record) with the
command line, the machine and the versions that produced them
(:mod:`benchmarks.record`). A command of several benchmarks keeps them in a
package of its own (:mod:`benchmarks.traced`, :mod:`benchmarks.kernelbench`,
:mod:`benchmarks.sharp`); a long survey runs as parallel shards
(:mod:`benchmarks.shards`). The hostile kernels (:mod:`benchmarks.hostile`) and the
damaged repros (:mod:`benchmarks.damaged`) are shared with the tests.
``benchmarks/gpu.sh`` runs the GPU benchmarks, one section per area.
``benchmarks/results/README.md`` says which result folders are current.
"""
