#!/usr/bin/env bash
# cluster.tool: scripts/cluster.sh itself, on a cluster of 3 hosts. Each host has its own name and
# address; its link is capped both ways and the cap changes while the cluster is up; a link goes
# down and comes back; mpirun places one rank per host; the link check reports a link that misses
# its rate; bad input gets one line and leaves nothing behind; `down`, and the watcher when the
# owner is killed, remove every namespace, interface and /etc/hosts line. Exits 77 with the tool's
# line where namespaces cannot be made. Prints "cluster.tool: ok" when every check passed.
set -uo pipefail
cluster=$(cd "$(dirname "$0")/../../scripts" && pwd)/cluster.sh
linkcheck=$(dirname "$cluster")/cluster_linkcheck.py
name=ctool
failures=0
fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}
trap '"$cluster" down --name $name; "$cluster" down --name ctkill' EXIT
trap 'exit 143' INT TERM

# Nothing of a cluster named $1 is left on this machine.
gone() {
  local what=""
  ip netns list | grep -q "^$1[0-9]" && what+=" namespaces"
  ip -o link show | grep -q "sg[vb]-$1" && what+=" interfaces"
  grep -q "# stragglar-cluster $1\$" /etc/hosts && what+=" /etc/hosts lines"
  [[ -e ${STRAGGLAR_CLUSTER_STATE:-/run/stragglar-cluster}/$1 ]] && what+=" state"
  [[ -z $what ]] || {
    echo "left behind:$what"
    return 1
  }
}

# Mbit/s of one stream FROM TO, or 0.
mbits() { "$cluster" measure "$1" "$2" 1 --name $name 2>/dev/null | awk '{ print $2 + 0 }'; }
# Whether $1 is within [$2, $3].
within() { python3 -c "import sys; a, lo, hi = map(float, sys.argv[1:]); sys.exit(not lo <= a <= hi)" "$@"; }

"$cluster" up 3 --name $name --rate 80mbit --no-check --owner $$
status=$?
((status == 77)) && exit 77
((status == 0)) || {
  echo "FAIL: up exited $status"
  exit 1
}
subnet=$(sed 's/\.[0-9]*$//' <<<"$("$cluster" status --name $name | awk '/^ctool1 / { print $2 }')")

for i in 1 2 3; do
  [[ $("$cluster" exec --name $name ctool$i hostname) == "ctool$i" ]] || fail "ctool$i's hostname"
  "$cluster" exec --name $name ctool$i ip -4 -o addr show dev eth0 | grep -q " $subnet\.$i/24" ||
    fail "ctool$i's address is not $subnet.$i"
  getent hosts ctool$i | grep -q "^$subnet\.$i " || fail "ctool$i does not resolve to $subnet.$i"
done

# Capped both ways: 80 Mbit/s everywhere; then ctool2 at 20 Mbit/s caps what it receives
# (ctool1 -> ctool2) and what it sends (ctool2 -> ctool3), and nothing else.
rate=$(mbits ctool1 ctool2)
within "$rate" 60 81 || fail "ctool1 -> ctool2 at 80mbit measured $rate Mbit/s"
"$cluster" rate --name $name ctool2 20mbit
rate=$(mbits ctool1 ctool2)
within "$rate" 15 20.5 || fail "into ctool2 at 20mbit: $rate Mbit/s"
rate=$(mbits ctool2 ctool3)
within "$rate" 15 20.5 || fail "out of ctool2 at 20mbit: $rate Mbit/s"
rate=$(mbits ctool3 ctool1)
within "$rate" 60 81 || fail "ctool3 -> ctool1 (untouched) measured $rate Mbit/s"
# One way: ctool3 sending at 20 Mbit/s caps ctool3 -> ctool1 and leaves ctool1 -> ctool3.
"$cluster" rate --name $name ctool3 20mbit --way out
rate=$(mbits ctool3 ctool1)
within "$rate" 15 20.5 || fail "out of ctool3 at 20mbit (--way out): $rate Mbit/s"
rate=$(mbits ctool1 ctool3)
within "$rate" 60 81 || fail "into ctool3, not capped by --way out, measured $rate Mbit/s"
"$cluster" status --name $name | grep -q "^ctool3 .*(out 20mbit)" ||
  fail "status does not show ctool3's one-way cap"

# The link check names a link that misses its rate: told ctool2 runs at 1gbit, it must not call
# the cluster link-bound. (A check that always says link-bound would pass everything else here.)
verdict=$(python3 "$linkcheck" --agent /run/stragglar-cluster/$name/agent --subnet "$subnet" \
  --hosts "ctool1 ctool2 ctool3" --rates "80mbit 1gbit 80mbit" --seconds 0.6 | tail -n 1)
[[ $verdict == cpu-bound:* ]] || fail "a link at a quarter of its claimed rate passed: $verdict"
"$cluster" rate --name $name all 80mbit
"$cluster" check --name $name >/dev/null || fail "the link check fails at 80mbit on 3 hosts"

# A link down: no connection (within the sender's bounded wait); up again: the rate is back.
"$cluster" link --name $name ctool2 down
rate=$(mbits ctool1 ctool2)
[[ $rate == 0 ]] || fail "ctool2's link is down, yet ctool1 -> ctool2 moved $rate Mbit/s"
"$cluster" link --name $name ctool2 up
sleep 1
rate=$(mbits ctool1 ctool2)
within "$rate" 60 81 || fail "after link up, ctool1 -> ctool2 measured $rate Mbit/s"

# mpirun places one rank on each host.
placed=$(timeout 60 "$cluster" run --name $name hostname 2>/dev/null | sort | tr '\n' ' ')
[[ $placed == "ctool1 ctool2 ctool3 " ]] || fail "mpirun ran on: $placed"

# Bad input: one line on stderr, a non-zero exit, nothing made.
bad_commands=("up 0 --name ctbad" "up 4x --name ctbad" "up 2 --rate fast --name ctbad"
  "up 2 --name Bad" "rate ctool9 10mbit --name $name" "rate ctool1 10mbit --way up --name $name"
  "link ctool1 sideways --name $name"
  "frobnicate")
for bad in "${bad_commands[@]}"; do
  # shellcheck disable=SC2086  # each is a command line
  output=$("$cluster" $bad 2>&1 >/dev/null)
  status=$?
  if ((status == 0)) || [[ $(wc -l <<<"$output") != 1 || $output != cluster:* ]]; then
    fail "\"$bad\" exited $status with: $output"
  fi
done
gone ctbad || fail "bad input left part of a cluster"

"$cluster" down --name $name
gone $name || fail "down left part of the cluster"

# The owner killed (a test run out of time): the watcher takes the cluster down.
sleep 600 &
owner=$!
"$cluster" up 2 --name ctkill --rate 50mbit --no-check --owner $owner >/dev/null ||
  fail "up with --owner"
kill -9 $owner
wait $owner 2>/dev/null
for _ in $(seq 1 20); do
  gone ctkill >/dev/null && break
  sleep 0.5
done
gone ctkill || fail "the owner was killed 10 s ago and the cluster is still up"

((failures == 0)) || exit 1
echo "cluster.tool: ok"
