import json, time
from pathlib import Path
from numoracle.kernelbench.problem import load_problem
from numoracle.kernelbench.cases import float64_bytes, reduced_sizes, varied_knobs
from numoracle.kernelbench.sampling import row_plan
from numoracle.kernelbench.judge import DEFAULT_MAX_BYTES
out=[]
for f in sorted(Path(".kernelbench").glob("level*/*.py")):
    t=time.perf_counter()
    try:
        p=load_problem(f); base=p.dropout_off()
        fits=float64_bytes(p,base)<=DEFAULT_MAX_BYTES
        small=reduced_sizes(p,base,most=max(1<<16,DEFAULT_MAX_BYTES//512)) if varied_knobs(p) else {}
        plan=None if fits or small is None else row_plan(p,base,small,DEFAULT_MAX_BYTES)
        out.append({"problem":f.parent.name+"/"+f.stem,"fits":fits,"sampled":plan is not None,
                    "knob":plan.knob if plan else None,"rows":plan.rows if plan else None,"total":plan.total if plan else None,"s":round(time.perf_counter()-t,2)})
    except Exception as e:
        out.append({"problem":f.parent.name+"/"+f.stem,"error":str(e)[:200]})
json.dump(out,open("/tmp/sample_census.json","w"),indent=1)
print(sum(o.get("fits",False) for o in out),"fit;",sum(o.get("sampled",False) for o in out),"sampled;",sum("error" in o for o in out),"errors of",len(out))
