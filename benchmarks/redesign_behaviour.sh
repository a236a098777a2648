#!/usr/bin/env bash
# Behaviour check of one tree: the same commands, one thread each, held-out figures from metrics.json (issue 65's "must hold").
# usage: benchmarks/redesign_behaviour.sh TREE OUT   (once per tree, e.g. a worktree of the commit before and one after;
# the two may run side by side: one thread each), then python -m benchmarks.redesign_collect behaviour ...
set -euo pipefail
tree=$1; out=$2; mkdir -p $out; cd $tree
export OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 NUMBA_NUM_THREADS=1 PYTHONPATH=$tree
e() { python -m enerf "$@"; }
log() { echo "== $(date +%H:%M:%S) $*"; }
log demo3000; e train --config configs/demo.txt --eval_every 0 --no_lpips --basedir $out --expname demo3000 > $out/demo3000.log 2>&1
log demo500;  e train --config configs/demo.txt --iters 500 --eval_every 0 --no_lpips --basedir $out --expname demo500 > $out/demo500.log 2>&1
log fern800;  e train --config configs/fern_cpu.txt --iters 800 --time_budget 0 --eval_every 0 --no_lpips --datadir ../shared/data/nerf_llff_data/fern --basedir $out --expname fern800 > $out/fern800.log 2>&1
log grid500;  e train --config configs/demo_grid.txt --iters 500 --eval_every 0 --no_lpips --basedir $out --expname grid500 > $out/grid500.log 2>&1
log shape300; e shape train --config configs/shape_cpu.txt --iters 300 --basedir $out --expname shape300 > $out/shape300.log 2>&1
log fox300;   e train --datadir ../shared/data/nerfstudio/fox --iters 300 --time_budget 0 --splat_seconds 0 --eval_every 0 --no_lpips --eval_stride 4 --basedir $out --expname fox300 > $out/fox300.log 2>&1
for run in demo500 fox300; do
  log splats $run
  e export splats --ckpt $out/$run/checkpoints/latest.pt --bake_seconds 0 --out $out/$run/start.ply > $out/$run.splats.log 2>&1
  e eval --ckpt $out/$run/checkpoints/latest.pt --splats $out/$run/start.ply > $out/$run.eval.log 2>&1
  sha256sum $out/$run/start.ply > $out/$run.ply.sha256
done
log done
