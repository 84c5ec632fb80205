#!/bin/sh
# tests/mpi-netns.sh PROG TOKENS GEN...: PROG, a program of 2 ranks, run by
# mpirun as two ranks in two network namespaces joined by a veth pair, so
# that its bytes cross a network interface (Open MPI's TCP transport, both
# its runtime's and the ranks' own, told to use only that link). mpirun
# runs in the first namespace; its launcher's agent (plm_rsh_agent: in
# place of ssh) enters the second with ip netns exec. The greedy tokens
# must be TOKENS' (the one-rank program's), and the second namespace's
# interface must have received bytes. Where namespaces cannot be made
# (not root, no ip, a kernel or container that forbids them) it says so on
# a "skip" line and exits 0, never printing "ok". Called by tests/mpi.sh.
set -u
prog=$1 want=$2
shift 2
. tests/lib.sh
# Under sanitizers (make test-asan) Open MPI's own allocations, made in the
# plugins it loads and unloads, are reported as leaks with no stack to
# suppress them by: leak detection is off for these programs, whose
# memory errors ASan still checks.
case "${KILN_CFLAGS_EXTRA:-}" in
*-fsanitize*) ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0"; export ASAN_OPTIONS ;;
esac
scratch netns
ns0=kiln-mpi0-$$ ns1=kiln-mpi1-$$ v0=kmpa$$ v1=kmpb$$
net=10.199.$(($$ % 200)).

if [ "$(id -u)" != 0 ] || ! command -v ip >/dev/null || ! ip netns add "$ns0" 2>"$T/err"; then
    echo "skip  netns: network namespaces cannot be made here ($(id -u) $(head -1 "$T/err" 2>/dev/null)); two ranks over a veth pair not tested"
    exit 0
fi
trap 'ip netns del "$ns0" 2>/dev/null; ip netns del "$ns1" 2>/dev/null; rm -rf "$T"' EXIT
if ! { ip netns add "$ns1" && ip link add "$v0" type veth peer name "$v1" &&
    ip link set "$v0" netns "$ns0" && ip link set "$v1" netns "$ns1" &&
    ip -n "$ns0" addr add "${net}1/24" dev "$v0" && ip -n "$ns1" addr add "${net}2/24" dev "$v1" &&
    ip -n "$ns0" link set "$v0" up && ip -n "$ns1" link set "$v1" up &&
    ip -n "$ns0" link set lo up && ip -n "$ns1" link set lo up; } 2>"$T/err"; then
    echo "skip  netns: the veth pair cannot be made here ($(head -1 "$T/err")); two ranks over it not tested"
    exit 0
fi

# Open MPI's agent: "AGENT [options] HOST COMMAND...", COMMAND run in HOST's namespace.
cat >"$T/agent" <<AGENT
#!/bin/sh
while [ \$# -gt 0 ]; do case "\$1" in -*) shift ;; *) break ;; esac; done
host=\$1
shift
case "\$host" in
${net}1) ns=$ns0 ;;
${net}2) ns=$ns1 ;;
*) echo "agent: unknown host \$host" >&2; exit 1 ;;
esac
echo "\$host \$ns" >>"$T/agent.log"
exec ip netns exec "\$ns" sh -c "\$*"
AGENT
chmod +x "$T/agent"

rx() { ip netns exec "$ns1" cat "/sys/class/net/$v1/statistics/rx_bytes"; }
before=$(rx)
# shellcheck disable=SC2068
timeout 120 ip netns exec "$ns0" mpirun --oversubscribe --host "${net}1,${net}2" -np 2 \
    --mca plm_rsh_agent "$T/agent" --mca btl tcp,self --mca btl_tcp_if_include "${net}0/24" \
    --mca oob_tcp_if_include "${net}0/24" "$prog" $@ >"$T/out" 2>"$T/err"
st=$?
after=$(rx)
if [ "$st" = 0 ] && cmp -s "$T/out" "$want" && grep -q "${net}2 $ns1" "$T/agent.log" &&
    [ $((after - before)) -gt 10000 ]; then
    ok "2 ranks in 2 network namespaces over a veth pair: the 1-rank tokens, $((after - before)) bytes received by the second"
else
    bad "2 ranks over a veth pair (exit $st, $((after - before)) bytes)"
    sed 's/^/      /' "$T/err" "$T/out"
fi
[ "$fails" = 0 ]
