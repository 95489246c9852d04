#!/usr/bin/env bash
# A new contributor's first `npm ci && npm test`, on a machine with none of the outside servers.
#
# Clones this repository (its committed HEAD) into a temp folder, runs `npm ci` there (with the
# network), then runs `npm test` inside a private mount and network namespace (`unshare -m -n`,
# loopback up, nothing listening on 6379 or 5432) where redis-server, redis-cli, nginx, postgres,
# initdb, pg_ctl, psql and chromium are hidden by overlay whiteouts over the folders that hold
# them. The tests that need those servers must skip, each kind with one loud line; everything else
# must pass. The skip lines are printed again at the end.
#
# Needs root (unshare, mount). Usage: scripts/bare-machine-test.sh [--keep]
#   --keep  leave the clone in place (its path is printed) instead of removing it.
set -euo pipefail

HIDE=(redis-server redis-cli nginx postgres initdb pg_ctl psql chromium chromium-browser)
src="$(cd "$(dirname "$0")/.." && pwd)"
keep=0
[ "${1:-}" = "--keep" ] && keep=1

if [ "$(id -u)" != 0 ]; then
  echo "bare-machine-test: needs root (unshare -m -n and overlay mounts); run it with sudo" >&2
  exit 2
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/rk-bare-XXXXXX")"
cleanup() { if [ "$keep" = 1 ]; then echo "bare-machine-test: clone kept in $work/repo"; else rm -rf "$work"; fi; }
trap cleanup EXIT

echo "bare-machine-test: cloning $src"
git clone -q "$src" "$work/repo"
cd "$work/repo"
echo "bare-machine-test: npm ci"
npm ci --no-audit --no-fund --loglevel=error

# Every folder that may hold one of the hidden programs: PATH, the sbin folders (Debian puts nginx
# there) and PostgreSQL's versioned bin folders (Debian keeps initdb and postgres there).
dirs=()
IFS=: read -r -a pathdirs <<<"$PATH"
for d in "${pathdirs[@]}" /usr/sbin /sbin /usr/local/sbin /usr/lib/postgresql/*/bin; do
  [ -d "$d" ] || continue
  d="$(readlink -f "$d")"
  for b in "${HIDE[@]}"; do
    if [ -e "$d/$b" ] || [ -L "$d/$b" ]; then
      case " ${dirs[*]:-} " in *" $d "*) ;; *) dirs+=("$d") ;; esac
    fi
  done
done

# Runs inside the namespaces: whiteouts, loopback, checks, then the tests.
inner="$work/inner.sh"
cat >"$inner" <<'EOF'
set -euo pipefail
hide=($HIDE_LIST)
scratch="$(mktemp -d)"
mount -t tmpfs tmpfs "$scratch"
i=0
for d in $HIDE_DIRS; do
  i=$((i + 1))
  mkdir -p "$scratch/u$i" "$scratch/w$i"
  for b in "${hide[@]}"; do
    if [ -e "$d/$b" ] || [ -L "$d/$b" ]; then mknod "$scratch/u$i/$b" c 0 0; fi
  done
  mount -t overlay overlay -o "lowerdir=$d,upperdir=$scratch/u$i,workdir=$scratch/w$i" "$d"
done
ip link set lo up
for b in "${hide[@]}"; do
  if command -v "$b" >/dev/null 2>&1; then echo "bare-machine-test: $b is still visible at $(command -v "$b")" >&2; exit 3; fi
done
for p in 6379 5432; do
  if (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then echo "bare-machine-test: something listens on $p" >&2; exit 3; fi
done
echo "bare-machine-test: hidden: ${hide[*]} (in $HIDE_DIRS); loopback up; nothing on 6379/5432"
env -u CI -u RATEKEEPER_TEST_PG_URL npm test
EOF

log="$work/test.log"
echo "bare-machine-test: npm test in unshare -m -n"
set +e
HIDE_LIST="${HIDE[*]}" HIDE_DIRS="${dirs[*]}" unshare -m -n bash "$inner" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
set -e

echo
echo "bare-machine-test: skip lines printed by the run:"
grep -a "SKIPPING" "$log" | sed 's/^/  /' | sort -u || true
if [ "$status" != 0 ]; then
  echo "bare-machine-test: FAILED (npm test exited $status)" >&2
  exit "$status"
fi
for kind in redis-server nginx PostgreSQL chromium; do
  if ! grep -aq "SKIPPING.*$kind\|$kind.*SKIPPING" "$log"; then
    echo "bare-machine-test: FAILED: no skip line names $kind" >&2
    exit 4
  fi
done
echo "bare-machine-test: passed"
