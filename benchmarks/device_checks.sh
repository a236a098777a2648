#!/bin/bash
# The GPU checks of the capture default and of the paper network's 2 x 2, as one script for a
# machine with a CUDA GPU (benchmarks/README.md "On a GPU"). Run from the repository root:
#
#   DATA=../shared/data OUT=gpu_out bash benchmarks/device_checks.sh
#
#  1. the 2 x 2 on fern with the paper's network (configs/paper_fern_cpu.txt), seeds SEEDS, STEPS
#     steps, the cells side by side on the one GPU (--jobs JOBS), then studies.cond_2x2's summary;
#  2. the capture default (enerf train --datadir CAPTURE, no config) on CUDA, BUDGET s of training,
#     the fox, then the boardgame; each run's metrics.json condensed into OUT/capture_<name>.json.
# Each part runs under its own timeout (T1, T2 seconds), so a slow machine still returns the rest.
set -u
DATA=${DATA:-../shared/data}; OUT=${OUT:-gpu_out}; DEV=${DEV:-cuda}
STEPS=${STEPS:-5000}; SEEDS=${SEEDS:-0 1 2}; JOBS=${JOBS:-4}; BUDGET=${BUDGET:-90}; T1=${T1:-600}; T2=${T2:-170}
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
R=${RUNS:-/tmp/device_runs}; mkdir -p $R $OUT
start=$(date +%s)
{
echo "== machine"; nvidia-smi -L 2>&1; nproc
python3 -c "import torch, sys; print(sys.version.split()[0], torch.__version__, torch.cuda.is_available() and torch.cuda.get_device_name())"
echo "== 1. the 2 x 2, paper_fern_cpu, seeds $SEEDS, $STEPS steps, $(date +%T)"
timeout $T1 python3 -m enerf.cli compare --scenes $DATA/nerf_llff_data/fern --config configs/paper_fern_cpu.txt \
  --modes none row none~equilibrated row~vanilla --seeds $SEEDS --jobs $JOBS --out $R/cond_fern_gpu -- \
  --iters $STEPS --time_budget 0 --device $DEV --eval_every 1000 --eval_views 1 --eval_stride 1 --kappa_every 1000 \
  --no_lpips --video none; echo "rc=$? at $(( $(date +%s) - start )) s"
python3 -m studies.cond_2x2 --setting fern_gpu=$R/cond_fern_gpu --partial --out $OUT/cond_2x2_gpu.json 2>&1 | tail -5
cp $R/cond_fern_gpu/compare.md $OUT/cond_fern_gpu_compare.md 2>/dev/null
for s in fox:nerfstudio/fox boardgame:captures/boardgame; do
  name=${s%%:*}; dir=$DATA/${s#*:}
  echo "== 2. $name: enerf train --datadir $dir --device $DEV --time_budget $BUDGET, $(date +%T)"
  t0=$(date +%s)
  timeout $T2 python3 -m enerf.cli train --datadir $dir --basedir $R --device $DEV --time_budget $BUDGET --video none \
    --no_lpips --quiet
  echo "rc=$? wall $(( $(date +%s) - t0 )) s"
  python3 - $R/$name/metrics.json $OUT/capture_$name.json <<'PY'
import json, sys
m = json.load(open(sys.argv[1]))
keep = {k: m.get(k) for k in ("psnr", "ssim", "steps", "train_seconds", "wall_seconds", "history")}
keep["per_view_psnr"] = {str(p["view"]): p["psnr"] for p in m["per_image"]}
json.dump(keep, open(sys.argv[2], "w"), indent=1)
print(f"{sys.argv[1]}: {m['psnr']:.2f} dB, {m['steps']} steps in {m['train_seconds']:.0f} s")
PY
done
echo "== done at $(( $(date +%s) - start )) s"
} 2>&1 | tee $OUT/device.log
