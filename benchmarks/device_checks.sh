#!/bin/bash
# The device checks as one script for a machine with a CUDA GPU (benchmarks/README.md "On a GPU").
# Run from the repository root:
#
#   DATA=../shared/data OUT=gpu_out bash benchmarks/device_checks.sh     # one device call (<= 8 min)
#   DRY=1 OUT=/tmp/dry bash benchmarks/device_checks.sh                  # CPU, CI-sized (tests/e2e/test_device_bench.py)
#
# Parts (PARTS, default "bench"):
#  bench  python -m benchmarks.device_bench: enerf train with no config on the fox, the boardgame and fern
#         (SCENES), the CUDA preset scored at TIMES seconds of training (its budget: the largest), the CPU
#         preset on the same GPU at CPU_TIMES; rays/s and held-out PSNR at each time, the GPU's name, torch's
#         and CUDA's versions -> OUT/device_bench.json (written after every run, so a killed call keeps
#         what ran).
#  2x2    the 2 x 2 on fern with the paper's network (configs/paper_fern_cpu.txt), seeds SEEDS, STEPS steps,
#         the cells side by side on the one GPU (--jobs JOBS), then studies.cond_2x2's summary (T1 s).
#
# Time budget of the default call (PARTS=bench, TIMES="30 60", CPU_TIMES="30"), from the H200 record
# benchmarks/gpu_capture.json (loading a capture took 9.8 s at a quarter size; at half size count 15 s):
#   start: python, torch, CUDA                                   ~15 s
#   CUDA preset, budget 60 s: fox 15 + 60 + 2 x 4 (7 views)      ~83 s
#                             boardgame 15 + 60 + 2 x 3          ~81 s
#                             fern 4 + 60 + 2 x 1                ~66 s
#   CPU preset, budget 30 s:  fox 10 + 30 + 3, boardgame 10 + 30 + 2, fern 3 + 30 + 1   ~119 s
#   in all                                                       ~365 s of the 480 s a device call may take
# so 300 s does not fit beside them: run it as its own call, one scene at a time, e.g.
#   SCENES=fern TIMES="90 300" CPU_TIMES="" bash benchmarks/device_checks.sh       (~330 s)
#   SCENES=fox TIMES="60 300" CPU_TIMES="" bash benchmarks/device_checks.sh        (~340 s)
# (TIMES="30 90" for all three scenes: ~435 s, too close to the limit for a first run.) T2 (default 450)
# stops the bench part before the call's limit.
set -u
DATA=${DATA:-../shared/data}; OUT=${OUT:-gpu_out}; DEV=${DEV:-cuda}; PARTS=${PARTS:-bench}; DRY=${DRY:-}
SCENES=${SCENES:-fox boardgame fern}; TIMES=${TIMES:-30 60}; CPU_TIMES=${CPU_TIMES-30}
STEPS=${STEPS:-5000}; SEEDS=${SEEDS:-0 1 2}; JOBS=${JOBS:-4}; T1=${T1:-600}; T2=${T2:-450}
export PYTHONUNBUFFERED=1 PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
R=${RUNS:-/tmp/device_runs}; mkdir -p $R $OUT
start=$(date +%s)
{
echo "== machine"; nvidia-smi -L 2>&1 || echo "(no nvidia-smi)"; nproc
python3 -c "import torch, sys; print(sys.version.split()[0], torch.__version__, torch.version.cuda, torch.cuda.is_available() and torch.cuda.get_device_name())"
for part in $PARTS; do
  case $part in
  bench)
    if [ -n "$DRY" ]; then
      echo "== bench, dry run (CPU, a tiny synthetic scene), $(date +%T)"
      python3 -m benchmarks.device_bench --dry-run --out $OUT
    else
      echo "== bench: $SCENES, CUDA preset at $TIMES s, CPU preset at ${CPU_TIMES:-no} s, $(date +%T)"
      timeout $T2 python3 -m benchmarks.device_bench --data $DATA --out $OUT --device $DEV --scenes "$SCENES" \
        --times "$TIMES" --cpu_times "$CPU_TIMES"
    fi
    echo "rc=$? at $(( $(date +%s) - start )) s";;
  2x2)
    echo "== 2x2: paper_fern_cpu, seeds $SEEDS, $STEPS steps, $(date +%T)"
    timeout $T1 python3 -m enerf.cli compare --scenes $DATA/nerf_llff_data/fern --config configs/paper_fern_cpu.txt \
      --modes none row none~equilibrated row~vanilla --seeds $SEEDS --jobs $JOBS --out $R/cond_fern_gpu -- \
      --iters $STEPS --time_budget 0 --device $DEV --eval_every 1000 --eval_views 1 --eval_stride 1 --kappa_every 1000 \
      --no_lpips --video none; echo "rc=$? at $(( $(date +%s) - start )) s"
    python3 -m studies.cond_2x2 --setting fern_gpu=$R/cond_fern_gpu --partial --out $OUT/cond_2x2_gpu.json 2>&1 | tail -5
    cp $R/cond_fern_gpu/compare.md $OUT/cond_fern_gpu_compare.md 2>/dev/null;;
  *) echo "unknown part $part (bench, 2x2)";;
  esac
done
echo "== done at $(( $(date +%s) - start )) s"
} 2>&1 | tee $OUT/device.log
