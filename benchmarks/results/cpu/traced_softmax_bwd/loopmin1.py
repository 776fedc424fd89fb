"""python loopmin1.py ARGS: `python -m benchmarks ARGS` with fused_cpu.LOOP_MIN = 1 (the loops judge every case)."""
import runpy, sys
from numoracle.oracle import fused_cpu
fused_cpu.LOOP_MIN = 1
sys.argv = ["benchmarks"] + sys.argv[1:]
runpy.run_module("benchmarks", run_name="__main__", alter_sys=True)
