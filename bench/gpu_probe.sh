set -u
export PYTHONPATH=. PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name --format=csv,noheader
for m in sample_models/transformer_block.py bench/models/convnet.py; do
  python3 bench/gpu_probe.py $m > $OUT/probe_$(basename $m .py).json 2>$OUT/probe_$(basename $m .py).err
  python3 bench/gpu_probe.py $m --trace /tmp/tr_$(basename $m .py) > $OUT/probe_$(basename $m .py)_trace.json 2>>$OUT/probe_$(basename $m .py).err
  python3 -m compilediag explain $m --device cuda --format json > $OUT/explain_$(basename $m .py).json 2>$OUT/explain_$(basename $m .py).err
done
cat $OUT/*.json | python3 -c "
import sys,json
for l in sys.stdin:
  l=l.strip()
  if l.startswith('{\"model'): print(l)
"
for f in $OUT/explain_*.json; do python3 -c "
import json,sys; r=json.load(open('$f')); t=r['timings']; print('$f', t['eager_ms']['median'], t['compiled_ms']['median'], t.get('device'), t.get('bound'))"; done
tail -3 $OUT/*.err
