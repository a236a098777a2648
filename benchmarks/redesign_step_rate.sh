#!/usr/bin/env bash
# Training steps per second of two trees side by side (before / after a restructuring), 2 threads, alone on
# the machine: benchmarks.step_rate of each tree in turn, demo_grid / fern_cpu / the zero-config fox in three
# rounds, then six more demo_grid pairs alternating which tree goes first. Each result is one JSON line in OUT.
# usage: benchmarks/redesign_step_rate.sh BEFORE_TREE AFTER_TREE OUT.jsonl
#        then python -m benchmarks.redesign_collect step_rate OUT.jsonl BEFORE_TREE AFTER_TREE --record R
set -euo pipefail
before=$(realpath $1); after=$(realpath $2); out=$(realpath $3)
run() { local tree=$1; shift; (cd $tree && echo "load $(cut -d' ' -f1-3 /proc/loadavg)" && python -m benchmarks.step_rate "$@" --json $out); }
for round in 1 2 3; do
  for tree in $before $after; do run $tree --config configs/demo_grid.txt --steps 150 --warmup 30; done
  for tree in $after $before; do run $tree --config configs/fern_cpu.txt --datadir ../shared/data/nerf_llff_data/fern --steps 60 --warmup 10; done
  for tree in $before $after; do run $tree --config '' --datadir ../shared/data/nerfstudio/fox --steps 60 --warmup 10; done
done
for round in 4 5 6 7 8 9; do
  if [ $((round % 2)) = 0 ]; then order="$after $before"; else order="$before $after"; fi
  for tree in $order; do run $tree --config configs/demo_grid.txt --steps 150 --warmup 30; done
done
