import sys, time, json
from numoracle.zoo import linear as L
from numoracle.running.runner import run_target, default_strategy
t = [x for x in L.TARGETS if x.name == "fp16_accumulation_from_2048"][0]
rows = []
for seed in range(int(sys.argv[1]), int(sys.argv[2])):
    t0 = time.time()
    res = run_target(t, examples=int(sys.argv[3]), seed=seed, store=None)
    row = {"seed": seed, "verdict": res.verdict, "cases_to_catch": res.cases_to_catch, "cases": res.cases, "shape": getattr(res, "repro_shape", None), "diagnosis": res.diagnosis[:200], "seconds": round(time.time()-t0)}
    print(json.dumps(row), flush=True)
