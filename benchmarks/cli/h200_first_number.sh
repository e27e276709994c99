#!/usr/bin/env bash
# GPU-host calls (nvidia-h200, .whl carried), each under 600 s: `bash benchmarks/cli/h200_first_number.sh screen`
# times the first number on screen and the warm measuring process (first_number.py) with the shipped count table,
# and checks a sample of the table against this host's torch; `... cudnn` times the warm measuring process in four
# fresh processes, each with an empty driver compute cache of its own, alternately under cuDNN's legacy (v7)
# convolution API and under its default one (v8); `... nosearch` times it in two more such processes under the
# default API without cuDNN's algorithm search (UNDERSTUDY_CUDNN_BENCHMARK=0); `... prewarm` and `... prewarm-nosearch`
# time a training workload's first measurement with and without its convolutions set up on other threads first
# (cudnn_prewarm.py), with the search and without it; `... new` times the warm measuring process on twenty workloads
# drawn from timm's benchmark files (new_workloads.py), with the search and then without it (`new search`, `new
# nosearch`: one of them); `... heuristic` times the warm measuring process on the five of those twenty slowest
# with the search and on mobilenetv3_large's training (results/slow-workloads.json): without the search, with and
# without cuDNN's heuristic mode B (TORCH_CUDNN_USE_HEURISTIC_MODE_B=1), then with the search under mode B, then
# without the search again in a process that finds the first one's driver compute cache (`heuristic off off-modeb`:
# only those runs); `... cache` times five new depthwise workloads without the search in a process with an empty
# driver compute cache, in one that also runs small depthwise convolutions after its warm-up, and in one with a cache
# the slow workloads filled in a process before; `... firststep` profiles the first training step of three of those
# depthwise workloads (first_step_ops.py) without the search, with cuDNN and with PyTorch's own convolution kernels,
# each in a fresh process with an empty driver compute cache.
set -u
source scripts/device_setup.sh
export PYTHONUNBUFFERED=1
python3 -c "import torch, timm; print('torch', torch.__version__, 'timm', timm.__version__)"
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.limit,memory.used --format=csv
case "${1:-}" in
  screen)
    timeout 420 python3 -m benchmarks.cli.first_number --out "$OUT" > "$OUT/first-number.txt" 2>&1
    echo "first_number rc=$?"; tail -n 30 "$OUT/first-number.txt"
    timeout 100 python3 -m benchmarks.cli.count_table_check --sample 40 --out "$OUT/count-table-check.json" \
      2> "$OUT/count-table-check.txt"
    echo "count_table_check rc=$?" ;;
  cudnn)
    for run in v7-1 v8-1 v7-2 v8-2; do
      api=${run%-*} cache=$(mktemp -d)
      if [ "$api" = v7 ]; then export TORCH_CUDNN_V8_API_DISABLED=1; else unset TORCH_CUDNN_V8_API_DISABLED; fi
      CUDA_CACHE_PATH=$cache timeout 130 python3 -m benchmarks.cli.first_number --child \
        > "$OUT/worker-$run.json" 2> "$OUT/worker-$run.txt"
      echo "worker $run rc=$?"; grep '^{' "$OUT/worker-$run.txt"; tail -n 1 "$OUT/worker-$run.json" | cut -c1-120
    done
    ;;
  nosearch)
    for run in nosearch-1 nosearch-2; do
      CUDA_CACHE_PATH=$(mktemp -d) UNDERSTUDY_CUDNN_BENCHMARK=0 timeout 130 python3 -m benchmarks.cli.first_number \
        --child > "$OUT/worker-$run.json" 2> "$OUT/worker-$run.txt"
      echo "worker $run rc=$?"; grep '^{' "$OUT/worker-$run.txt"
    done ;;
  prewarm|prewarm-nosearch)
    # One training workload per fresh process (cudnn_prewarm.py), model:threads: as the engine measures it (0
    # threads), and after running its convolutions on 8 threads (or 1) first.
    runs="mobilenetv3_large_100:0 mobilenetv3_large_100:8 regnety_016:0 regnety_016:8" search=--no-search
    [ "$1" = prewarm ] && runs="$runs mobilenetv3_large_100:1" search=
    for run in $runs; do
      CUDA_CACHE_PATH=$(mktemp -d) timeout 120 python3 -m benchmarks.cli.cudnn_prewarm "${run%:*}" train 64 \
        --threads "${run#*:}" $search >> "$OUT/$1.jsonl" 2>> "$OUT/$1.txt"
      echo "$1 $run rc=$?"; tail -n 1 "$OUT/$1.jsonl"
    done ;;
  new)
    runs="${*:2}"
    for name in ${runs:-search nosearch}; do
      if [ "$name" = search ]; then search=1 limit=300; else search=0 limit=150; fi
      CUDA_CACHE_PATH=$(mktemp -d) UNDERSTUDY_CUDNN_BENCHMARK=$search timeout "$limit" python3 -m \
        benchmarks.cli.first_number --child --workloads benchmarks/cli/results/new-workloads.json \
        > "$OUT/new-$name.json" 2> "$OUT/new-$name.txt"
      echo "new $name rc=$?"; grep '^{' "$OUT/new-$name.txt" | cut -c1-200
    done ;;
  heuristic)
    # name:mode B:driver compute cache; off-cached finds off's cache. Names after `heuristic` pick some of the runs
    # (off-cached only after off), for a call with less device time left.
    off_cache=$(mktemp -d) picked=" ${*:2} "
    for run in off:0:$off_cache off-modeb:1:$(mktemp -d) on-modeb:1:$(mktemp -d) off-cached:0:$off_cache; do
      name=${run%%:*} rest=${run#*:} modeb=${rest%%:*} cache=${rest#*:}
      [ "$picked" = "  " ] || [[ "$picked" == *" $name "* ]] || continue
      # Limits that keep the four runs inside one 600 s call.
      search=0 limit=120; [ "${name%%-*}" = on ] && search=1 limit=200
      if [ "$modeb" = 1 ]; then export TORCH_CUDNN_USE_HEURISTIC_MODE_B=1; else unset TORCH_CUDNN_USE_HEURISTIC_MODE_B; fi
      CUDA_CACHE_PATH=$cache UNDERSTUDY_CUDNN_BENCHMARK=$search timeout $limit python3 -m benchmarks.cli.first_number \
        --child --workloads benchmarks/cli/results/slow-workloads.json > "$OUT/heuristic-$name.json" \
        2> "$OUT/heuristic-$name.txt"
      echo "heuristic $name rc=$?"; grep '^{' "$OUT/heuristic-$name.txt" | cut -c1-200
    done ;;
  cache)
    # Without the search: five depthwise training workloads the other lists lack (results/depthwise-workloads.json),
    # in a process with an empty driver compute cache, then in one whose cache the slow workloads filled first.
    # fresh-warmed: an empty cache, but depthwise convolutions run after the warm-up (first_number.depthwise_warm_up).
    filled=$(mktemp -d)
    for run in fresh:depthwise:$(mktemp -d) fresh-warmed:depthwise:$(mktemp -d) fill:slow:$filled \
        filled:depthwise:$filled; do
      name=${run%%:*} rest=${run#*:} list=${rest%%:*} cache=${rest#*:} warm=
      [ "$name" = fresh-warmed ] && warm=--depthwise-warm-up
      CUDA_CACHE_PATH=$cache UNDERSTUDY_CUDNN_BENCHMARK=0 timeout 90 python3 -m benchmarks.cli.first_number --child \
        $warm --workloads "benchmarks/cli/results/$list-workloads.json" > "$OUT/cache-$name.json" \
        2> "$OUT/cache-$name.txt"
      echo "cache $name rc=$? cache $(du -sk "$cache" | cut -f1) KiB"; grep '^{' "$OUT/cache-$name.txt" | cut -c1-200
    done ;;
  firststep)
    for model in efficientnet_b0 mixnet_s ghostnet_100; do
      for cudnn in "" --no-cudnn; do
        CUDA_CACHE_PATH=$(mktemp -d) timeout 90 python3 -m benchmarks.cli.first_step_ops $model train 64 $cudnn \
          >> "$OUT/first-step-depthwise.txt" 2>&1
        echo "firststep $model ${cudnn:-cudnn} rc=$?"
      done
    done
    grep -E "cuDNN|^build|first step|^step|convolution" "$OUT/first-step-depthwise.txt" ;;
  *) echo "usage: $0 screen|cudnn|nosearch|prewarm|prewarm-nosearch|new|heuristic|cache|firststep" >&2; exit 2 ;;
esac
