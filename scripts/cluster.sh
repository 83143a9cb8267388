#!/usr/bin/env bash
# An emulated cluster on this machine: N hosts, each a network namespace with its own hostname (a
# UTS namespace), joined by a bridge through veth pairs, each host's link capped both ways with
# `tc tbf`. OpenMPI starts ranks inside the hosts through a launch agent. docs/cluster.md.
#
#   scripts/cluster.sh up N[xG] [--rate 200mbit] [--name h] [--owner PID] [--no-check]
#   scripts/cluster.sh run [MPIRUN-ARGS...] PROGRAM [ARGS...]   # mpirun over the hosts, G per host
#   scripts/cluster.sh exec HOST COMMAND [ARGS...]               # a command inside one host
#   scripts/cluster.sh rate HOST|all RATE [--way out|in]         # change a cap while jobs run
#   scripts/cluster.sh link HOST up|down                         # take a host's link down and up
#   scripts/cluster.sh measure FROM TO [SECONDS]                 # one TCP stream's goodput
#   scripts/cluster.sh check                                     # the link-bound check again
#   scripts/cluster.sh status | hosts | down
#
# Every command but `up` takes --name NAME (default h, or $STRAGGLAR_CLUSTER): the cluster's name
# is its hosts' prefix (h1, h2, ...). Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN), iproute2,
# util-linux and python3; where namespaces cannot be made, `up` says so in one line and exits 77.
# Addresses: one 10.77.K.0/24 per cluster (the first K free on this machine), hosts .1 to .N, the
# bridge .254. No traffic leaves the namespaces this script makes.
set -euo pipefail

script_dir=$(cd "$(dirname "$0")" && pwd)
state_root=${STRAGGLAR_CLUSTER_STATE:-/run/stragglar-cluster}
name=${STRAGGLAR_CLUSTER:-h}
readonly skip_code=77

die() {
  echo "cluster: $*" >&2
  exit 1
}

usage() {
  awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0" >&2
  exit 2
}

# Takes --name from anywhere before the command's own positional arguments.
parse_name() {
  local rest=()
  while (($# > 0)); do
    case "$1" in
      --name)
        (($# >= 2)) || die "--name needs a value"
        name=$2
        shift 2
        ;;
      --name=*)
        name=${1#--name=}
        shift
        ;;
      *)
        rest+=("$1")
        shift
        ;;
    esac
  done
  args=("${rest[@]+"${rest[@]}"}")
}

check_name() {
  # Interface names are at most 15 characters: "sgb-" + name, "sgv-" + host.
  [[ $name =~ ^[a-z][a-z0-9]{0,5}$ ]] ||
    die "--name \"$name\" must be 1-6 lowercase letters and digits, starting with a letter"
}

dir() { echo "$state_root/$name"; }

require_cluster() {
  [[ -f $(dir)/hosts ]] || die "no cluster named $name is up (scripts/cluster.sh up N --name $name)"
  mapfile -t hosts <"$(dir)/hosts"
  read -r ranks_per_host <"$(dir)/ranks_per_host"
  read -r subnet <"$(dir)/subnet"
}

host_index() {
  local host=$1 i
  for i in "${!hosts[@]}"; do
    [[ ${hosts[$i]} == "$host" ]] && {
      echo "$i"
      return
    }
  done
  die "$host is not a host of cluster $name (${hosts[*]})"
}

# Runs a command inside host $1: its network and its hostname.
in_host() {
  local host=$1
  shift
  nsenter --net="/run/netns/$host" --uts="$(dir)/uts/$host" -- "$@"
}

# Bytes a token bucket may send at once: 100 us at the rate, at least 4 KiB (two full frames). A
# link never sends faster than its rate for longer: with tc's usual 10 ms bucket an idle 200 Mbit/s
# link sent 250 KB at once, and StragglAR's rounds of 88 KB looked 1.7x faster than on a link
# that keeps its rate (docs/cluster.md).
burst_for() {
  python3 -c '
import re, sys
m = re.fullmatch(r"([0-9.]+)([kmg]?)(bit|bps)", sys.argv[1].lower())
if not m: sys.exit(1)
scale = {"": 1, "k": 1e3, "m": 1e6, "g": 1e9}[m.group(2)] * (8 if m.group(3) == "bps" else 1)
print(max(4096, int(float(m.group(1)) * scale / 8 * 100e-6)))' "$1" 2>/dev/null ||
    die "rate \"$1\" is not a tc rate such as 200mbit, 1gbit, 25mbps"
}

# set_rate HOST RATE [both|out|in]: the host's link capped both ways, or only what it sends (out)
# or receives (in); a cap on one way leaves the other as it was.
set_rate() {
  local host=$1 rate=$2 way=${3:-both} burst
  burst=$(burst_for "$rate")
  # Egress inside the host (what it sends), and egress of the bridge-side end (what it receives).
  if [[ $way != in ]]; then
    in_host "$host" tc qdisc replace dev eth0 root tbf rate "$rate" burst "$burst" latency 100ms
  fi
  if [[ $way != out ]]; then
    tc qdisc replace dev "sgv-$host" root tbf rate "$rate" burst "$burst" latency 100ms
  fi
  if [[ $way == both ]]; then
    echo "$rate" >"$(dir)/rate.$host"
    rm -f "$(dir)/rate-out.$host" "$(dir)/rate-in.$host"
  else
    echo "$rate" >"$(dir)/rate-$way.$host"
  fi
}

# /etc/hosts lines of this cluster, so that `mpirun --host h1,...` resolves its hosts.
hosts_file_edit() {
  local action=$1 tmp
  (
    flock 9
    tmp=$(mktemp /etc/hosts.stragglar.XXXXXX)
    grep -v " # stragglar-cluster $name\$" /etc/hosts >"$tmp" || true
    if [[ $action == add ]]; then
      local i
      for i in "${!hosts[@]}"; do
        echo "$subnet.$((i + 1)) ${hosts[$i]} # stragglar-cluster $name" >>"$tmp"
      done
    fi
    cat "$tmp" >/etc/hosts # in place: /etc/hosts may be a bind mount
    rm -f "$tmp"
  ) 9>"$state_root/.lock"
}

cmd_down() {
  check_name
  local d
  d=$(dir)
  [[ -d $d ]] || return 0
  if [[ -f $d/watcher.pid ]]; then
    local watcher
    read -r watcher <"$d/watcher.pid" || true
    [[ -z ${watcher:-} || $watcher == "${STRAGGLAR_CLUSTER_WATCHER:-}" ]] ||
      kill "$watcher" 2>/dev/null || true
  fi
  hosts=()
  [[ -f $d/hosts ]] && mapfile -t hosts <"$d/hosts"
  local host pids
  for host in "${hosts[@]+"${hosts[@]}"}"; do
    # Whatever still runs inside the host (orted, ranks of a killed job) goes with it.
    if [[ -e /run/netns/$host ]]; then
      pids=$(ip netns pids "$host" 2>/dev/null || true)
      [[ -z $pids ]] || kill -9 $pids 2>/dev/null || true
    fi
    ip link del "sgv-$host" 2>/dev/null || true
    ip netns del "$host" 2>/dev/null || true
    if [[ -e $d/uts/$host ]]; then
      umount "$d/uts/$host" 2>/dev/null || true
    fi
  done
  ip link del "sgb-$name" 2>/dev/null || true
  if [[ -f $d/subnet ]]; then
    read -r subnet <"$d/subnet"
    hosts_file_edit remove
  fi
  rm -rf "$d"
}

# The first 10.77.K.0/24 no interface or route of this machine uses (under the state lock).
free_subnet() {
  local k used
  used=$( (ip -4 addr show; ip -4 route show) 2>/dev/null)
  for k in $(seq 1 254); do
    if ! grep -q "10\.77\.$k\." <<<"$used" && ! grep -qx "10.77.$k" "$state_root"/*/subnet 2>/dev/null; then
      echo "10.77.$k"
      return
    fi
  done
  die "no free 10.77.K.0/24 subnet on this machine"
}

allocate_subnet() {
  (
    flock 9
    local s
    s=$(free_subnet)
    echo "$s" >"$(dir)/subnet"
    echo "$s"
  ) 9>"$state_root/.lock"
}

# Why network namespaces cannot be made here, or nothing.
cannot_make_namespaces() {
  [[ $(id -u) -eq 0 ]] || {
    echo "not root"
    return
  }
  local missing tool
  for tool in ip tc nsenter unshare python3 flock; do
    command -v "$tool" >/dev/null || missing+=" $tool"
  done
  [[ -z ${missing:-} ]] || {
    echo "missing$missing"
    return
  }
  local probe="sgprobe$$"
  if ! ip netns add "$probe" 2>/dev/null; then
    echo "ip netns add failed (no CAP_NET_ADMIN?)"
    return
  fi
  if ! ip netns exec "$probe" tc qdisc add dev lo root tbf rate 1mbit burst 32kb latency 10ms \
    2>/dev/null; then
    ip netns del "$probe"
    echo "tc tbf is unavailable"
    return
  fi
  ip netns del "$probe"
}

cmd_up() {
  local shape="" rate=200mbit owner="" check=yes
  while (($# > 0)); do
    case "$1" in
      --rate)
        rate=${2:?--rate needs a value}
        shift 2
        ;;
      --owner)
        owner=${2:?--owner needs a pid}
        shift 2
        ;;
      --no-check)
        check=no
        shift
        ;;
      -*) die "up: unknown option $1" ;;
      *)
        [[ -z $shape ]] || die "up: one shape, e.g. 4 or 4x2; got $shape and $1"
        shape=$1
        shift
        ;;
    esac
  done
  check_name
  [[ $shape =~ ^([0-9]+)(x([0-9]+))?$ ]] || die "up: shape must be N or NxG (N hosts, G ranks each), e.g. 4x2"
  local num_hosts=${BASH_REMATCH[1]} per_host=${BASH_REMATCH[3]:-1}
  ((num_hosts >= 1 && num_hosts <= 64)) || die "up: 1 to 64 hosts, got $num_hosts"
  ((per_host >= 1)) || die "up: at least one rank per host"
  [[ -z $owner ]] || kill -0 "$owner" 2>/dev/null || die "up: --owner $owner is not a running process"
  burst_for "$rate" >/dev/null
  local why
  why=$(cannot_make_namespaces)
  if [[ -n $why ]]; then
    echo "cluster: cannot make network namespaces here ($why); emulated hosts need root with CAP_NET_ADMIN"
    exit "$skip_code"
  fi
  mkdir -p "$state_root"
  # A leftover cluster of the same name (a killed run) goes first.
  cmd_down
  hosts=()
  local i
  for i in $(seq 1 "$num_hosts"); do hosts+=("$name$i"); done
  for i in "${hosts[@]}"; do
    [[ ! -e /run/netns/$i ]] || die "up: a network namespace named $i exists and is not this tool's; pick another --name"
  done
  local d
  d=$(dir)
  mkdir -p "$d/uts"
  # From here on, a failure or a signal takes down what was made.
  trap 'cmd_down; exit 1' ERR INT TERM
  subnet=$(allocate_subnet)
  printf '%s\n' "${hosts[@]}" >"$d/hosts"
  echo "$per_host" >"$d/ranks_per_host"
  echo "unchecked" >"$d/verdict"
  local bridge="sgb-$name"
  ip link add "$bridge" type bridge
  # Bridged frames must not reach the machine's firewall (br_netfilter), whose rules are not ours.
  ip link set "$bridge" type bridge nf_call_iptables 0 nf_call_ip6tables 0 2>/dev/null || true
  ip addr add "$subnet.254/24" dev "$bridge"
  ip link set "$bridge" up
  for i in "${!hosts[@]}"; do
    local host=${hosts[$i]}
    ip netns add "$host"
    touch "$d/uts/$host"
    unshare --uts="$d/uts/$host" hostname "$host"
    ip link add "sgv-$host" type veth peer name eth0 netns "$host"
    ip link set "sgv-$host" master "$bridge" up
    in_host "$host" ip addr add "$subnet.$((i + 1))/24" dev eth0
    in_host "$host" ip link set eth0 up
    in_host "$host" ip link set lo up
    set_rate "$host" "$rate"
  done
  hosts_file_edit add
  write_agent
  if [[ -n $owner ]]; then
    # Takes the cluster down when its owner ends, even when the owner is killed (a test run out of
    # time): in its own session, so that a signal to the owner's process group spares it.
    setsid bash -c '
      owner=$1 script=$2 name=$3
      while kill -0 "$owner" 2>/dev/null; do sleep 1; done
      STRAGGLAR_CLUSTER_WATCHER=$$ "$script" down --name "$name"' \
      cluster-watcher "$owner" "$script_dir/cluster.sh" "$name" </dev/null >/dev/null 2>&1 &
    echo $! >"$d/watcher.pid"
  fi
  trap - ERR INT TERM
  echo "cluster $name: ${#hosts[@]} hosts (${hosts[*]}) of $per_host ranks, links $rate both ways, $subnet.0/24"
  if [[ $check == yes ]]; then cmd_check; fi
}

# The OpenMPI launch agent: `AGENT HOST COMMAND...` runs COMMAND inside HOST, as ssh would.
write_agent() {
  cat >"$(dir)/agent" <<EOF
#!/bin/sh
# OpenMPI's launch agent for cluster $name (scripts/cluster.sh): runs a command inside a host.
host=\$1
shift
exec nsenter --net="/run/netns/\$host" --uts="$(dir)/uts/\$host" -- /bin/sh -c "\$*"
EOF
  chmod +x "$(dir)/agent"
}

cmd_check() {
  require_cluster
  local rates=() host verdict
  for host in "${hosts[@]}"; do
    rates+=("$(cat "$(dir)/rate.$host")")
  done
  set +e
  verdict=$(python3 "$script_dir/cluster_linkcheck.py" --agent "$(dir)/agent" --subnet "$subnet" \
    --hosts "${hosts[*]}" --rates "${rates[*]}")
  local status=$?
  set -e
  echo "$verdict" | sed '$d'
  echo "$verdict" | tail -n 1 >"$(dir)/verdict"
  echo "cluster $name: $(cat "$(dir)/verdict")"
  return "$status"
}

cmd_measure() {
  require_cluster
  (($# == 2 || $# == 3)) || die "measure: needs FROM TO [SECONDS]"
  host_index "$1" >/dev/null
  host_index "$2" >/dev/null
  python3 "$script_dir/cluster_linkcheck.py" --agent "$(dir)/agent" --subnet "$subnet" \
    --hosts "${hosts[*]}" --rates "" --pair "$1" "$2" --seconds "${3:-1}"
}

cmd_run() {
  require_cluster
  local host_list="" host
  for host in "${hosts[@]}"; do host_list+="${host_list:+,}$host:$ranks_per_host"; done
  local verdict
  read -r verdict <"$(dir)/verdict"
  [[ $verdict == link-bound* ]] ||
    echo "cluster: warning: the link check says \"$verdict\"; times measure the CPU, not the links" >&2
  # tcp between hosts, shared memory (vader) inside one; the launcher's own traffic on the subnet
  # too. PMIX_MCA_gds=hash: the default data store failed one launch in six here.
  # mpi_yield_when_idle: the hosts share this machine's cores, which OpenMPI cannot see (each host
  # has its own slots), so by default every waiting rank spins, and a message waits for its
  # receiver's next time slice: the link probe measured 3-4.7 ms per message on 4 hosts and 2
  # cores, 34-46 us with waiting ranks yielding (4x1, 200 Mbit/s). On one oversubscribed host
  # mpirun sets it itself.
  # pml ob1 (the layer these transports run under anyway) and hwloc without its PCI scan (it
  # places network cards and GPUs, and a host's one card is a veth): each rank otherwise opens and
  # tries UCX's layer first and reads every PCI device, 0.37 s of a 4-host job's start on 2 cores
  # (docs/results/test-time-2026-12-01.md).
  # mpirun runs inside the first host, as on a cluster whose launch node is one of its hosts: run
  # from outside every host (a node with no ranks), OpenMPI 4.1.4 put each rank's next host's
  # ranks in its MPI_COMM_TYPE_SHARED communicator (4x2: rank 0 with ranks 2 and 3), and collectives
  # on those communicators hung.
  HWLOC_COMPONENTS=-pci,-linuxio exec nsenter --net="/run/netns/${hosts[0]}" \
    --uts="$(dir)/uts/${hosts[0]}" -- \
    mpirun --allow-run-as-root --host "$host_list" -np $((${#hosts[@]} * ranks_per_host)) \
    --mca plm_rsh_agent "$(dir)/agent" --mca btl tcp,vader,self \
    --mca btl_tcp_if_include "$subnet.0/24" --mca oob_tcp_if_include "$subnet.0/24" \
    --mca mpi_yield_when_idle 1 --mca pml ob1 --bind-to none -x PMIX_MCA_gds=hash \
    -x HWLOC_COMPONENTS "$@"
}

cmd_exec() {
  require_cluster
  (($# >= 2)) || die "exec: needs HOST COMMAND"
  host_index "$1" >/dev/null
  in_host "$@"
}

cmd_rate() {
  require_cluster
  local way=both
  if (($# == 4)) && [[ $3 == --way ]]; then
    [[ $4 == out || $4 == in ]] || die "rate: --way is out or in, not \"$4\""
    way=$4
  elif (($# != 2)); then
    die "rate: needs HOST|all RATE [--way out|in]"
  fi
  local targets=("$1")
  [[ $1 != all ]] || targets=("${hosts[@]}")
  local host
  for host in "${targets[@]}"; do
    host_index "$host" >/dev/null
    set_rate "$host" "$2" "$way"
  done
}

cmd_link() {
  require_cluster
  (($# == 2)) && [[ $2 == up || $2 == down ]] || die "link: needs HOST up|down"
  host_index "$1" >/dev/null
  ip link set "sgv-$1" "$2"
}

cmd_status() {
  require_cluster
  echo "cluster $name: ${#hosts[@]} hosts of $ranks_per_host ranks, $subnet.0/24, bridge sgb-$name"
  echo "link check: $(cat "$(dir)/verdict")"
  local i state way ways
  for i in "${!hosts[@]}"; do
    state=$(cat "/sys/class/net/sgv-${hosts[$i]}/operstate" 2>/dev/null || echo missing)
    ways=""
    for way in out in; do
      [[ ! -f $(dir)/rate-$way.${hosts[$i]} ]] ||
        ways+=" ($way $(cat "$(dir)/rate-$way.${hosts[$i]}"))"
    done
    printf '%-8s %-14s rate %-10s link %s%s\n' "${hosts[$i]}" "$subnet.$((i + 1))" \
      "$(cat "$(dir)/rate.${hosts[$i]}")" "$state" "$ways"
  done
}

(($# >= 1)) || usage
command=$1
shift
case "$command" in
  up)
    parse_name "$@"
    cmd_up "${args[@]+"${args[@]}"}"
    ;;
  down | run | exec | rate | link | measure | check | status | hosts)
    # run and exec pass the rest on untouched: --name only in front.
    if [[ $command == run || $command == exec ]]; then
      if [[ ${1:-} == --name ]]; then
        name=${2:?--name needs a value}
        shift 2
      fi
      args=("$@")
    else
      parse_name "$@"
    fi
    check_name
    case "$command" in
      down) cmd_down ;;
      hosts)
        require_cluster
        printf '%s\n' "${hosts[@]}"
        ;;
      *) "cmd_$command" "${args[@]+"${args[@]}"}" ;;
    esac
    ;;
  -h | --help | help) usage ;;
  *) die "unknown command \"$command\" (up, down, run, exec, rate, link, measure, check, status, hosts)" ;;
esac
