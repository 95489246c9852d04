#!/usr/bin/env bash
# Redis CPU per bucket decision: today's fast-path script (GET, decide, SET PX) against the
# BITFIELD routes of docs/benchmarks/redis.md ("A route to fewer commands for the buckets").
# A one-off measurement, not a section of `npm run bench`: it needs redis-server and
# redis-benchmark on PATH, starts its own redis-server on a free loopback port (pinned to CPU 1,
# the load to CPU 0) and stops it at the end.   Usage: bash bench/bitfield/run.sh [rounds]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
rounds=${1:-3}
port=6391; while (echo > /dev/tcp/127.0.0.1/$port) 2>/dev/null; do port=$((port + 1)); done
dir=$(mktemp -d)
taskset -c 1 redis-server --port "$port" --bind 127.0.0.1 --save "" --appendonly no --daemonize yes \
  --logfile "$dir/redis.log" --pidfile "$dir/redis.pid"
trap 'redis-cli -p "$port" shutdown nosave >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
R="redis-cli -p $port"
for _ in $(seq 50); do $R ping >/dev/null 2>&1 && break; sleep 0.1; done
today=$($R script load "$(cat "$here/today-bucket.lua")")
inscript=$($R script load "$(cat "$here/bitfield-in-script.lua")")
# A fixed clock: limit 100 per 60 s, cost 1, capacity 100; nowL = now x limit, K as in redis.md.
now=1764200000000
read -r nowL K incK < <(python3 -c "
now=$now; limit=100; W=60000; cap=100; cost=1
nowL=now*limit; inc=cost*W; full=cap*W; K=2**63-1-(nowL+full-inc); print(nowL, K, inc-K)")
cpu() { $R info cpu | tr -d '\r' | awk -F: '/^used_cpu_(user|sys):/{s+=$2} END{printf "%.6f", s}'; }
stat() { $R info commandstats | tr -d '\r' | grep "cmdstat_$1:" | sed 's/.*:calls=\([0-9]*\),usec=[0-9]*,usec_per_call=\([0-9.]*\).*/\1 \2/'; }
measure() {
  local label=$1 name=$2; shift 2
  $R config resetstat >/dev/null
  local c0 c1 calls upc; c0=$(cpu)
  taskset -c 0 redis-benchmark -p "$port" -c 50 -P 16 -n 600000 -r 50000 -q "$@" >/dev/null
  c1=$(cpu); read -r calls upc < <(stat "$name")
  printf '%-40s exec %5s us  CPU %s us per call\n' "$label" "$upc" "$(python3 -c "print(round(($c1-$c0)*1e6/$calls,2))")"
}
# Create the keys first, so that the rounds measure the common case (a key of this epoch).
taskset -c 0 redis-benchmark -p "$port" -c 50 -n 100000 -r 50000 -q EVALSHA "$today" 1 k:__rand_int__ $now >/dev/null
taskset -c 0 redis-benchmark -p "$port" -c 50 -n 100000 -r 50000 -q EVALSHA "$inscript" 1 j:__rand_int__ $now >/dev/null
for i in $(seq "$rounds"); do
  echo "round $i"
  measure "EVALSHA today (GET + SET)" evalsha EVALSHA "$today" 1 k:__rand_int__ $now
  measure "EVALSHA with BITFIELD inside" evalsha EVALSHA "$inscript" 1 j:__rand_int__ $now
  measure "BITFIELD from the client" bitfield BITFIELD b:__rand_int__ GET u63 0 OVERFLOW SAT INCRBY u63 0 "-$nowL" \
    INCRBY u63 0 "$nowL" OVERFLOW FAIL INCRBY u63 0 "$K" INCRBY u63 0 "$incK"
  measure "PEXPIRE from the client" pexpire PEXPIRE b:__rand_int__ 60000
done
