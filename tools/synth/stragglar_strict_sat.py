#!/usr/bin/env python3
"""SAT version of the strict model of stragglar_flow_ilp.py (kept for reference).

Solves n <= 32 in seconds with CaDiCaL, but did not finish n = 63 in 10 CPU-minutes; the flow ILP
does it in under a second. Compact encoding: no pair variables.

Canonical labelling: ranks 0..m-1 plus straggler sigma = m, chunks 0..m-1, m = n-1,
K = ceil(log2 n), L = m-1+K rounds (0..L-1). Round r < m: rank r <-> sigma exchange chunk r.

Strict model (no receive slot lost in rounds < m beyond the unavoidable start-up losses; all
2^K - n slack slots go to the tail):
every chunk spreads as a binomial tree, i.e. exactly 2^(a-1) copies at age a = 1..K-1 and the
remaining m - 2^(K-1) at age K (for chunks whose age-K round is < m). Consequently, in rounds < m:
  * every non-sigma holder of a chunk of age 1..K-1 ("young") forwards it, so a rank holds at most
    one young chunk and the exchanging rank holds none;
  * a rank that is not exchanging and holds no young chunk forwards the age-K chunk (round >= K), so
    it must hold it.
With those rules senders and receivers of every chunk match exactly, so no send variables are
needed before round m. Rounds m..L-1 (tail, sigma free) use a generic model: send variables and
#receivers(c,t) <= #senders(c,t) per chunk via totalizers.
Variables: x[r,c,t] = rank r receives chunk c in round t.
"""
import itertools
import sys


class CNF:
    def __init__(self):
        self.nv = 0
        self.cl = []

    def new(self):
        self.nv += 1
        return self.nv

    def add(self, c):
        self.cl.append(c)

    def amo(self, lits):
        lits = list(lits)
        if len(lits) <= 1:
            return
        if len(lits) <= 6:
            for a, b in itertools.combinations(lits, 2):
                self.add([-a, -b])
            return
        prev = None
        for l in lits:
            s = self.new()
            self.add([-l, s])
            if prev is not None:
                self.add([-prev, s])
                self.add([-prev, -l])
            prev = s

    def totalizer(self, lits, cap, up=True, down=True):
        """Returns outputs o[1..cap] with o[k] <-> (sum >= k) (directions as requested);
        sums above cap saturate (o[cap] means >= cap)."""
        lits = list(lits)
        if not lits:
            return []
        if len(lits) == 1:
            return [lits[0]]
        mid = len(lits) // 2
        a = self.totalizer(lits[:mid], cap, up, down)
        b = self.totalizer(lits[mid:], cap, up, down)
        n = min(cap, len(a) + len(b))
        o = [self.new() for _ in range(n)]
        for i in range(len(a) + 1):
            for j in range(len(b) + 1):
                k = i + j
                if up and k >= 1:
                    kk = min(k, n)
                    cl = [o[kk - 1]]
                    if i:
                        cl.append(-a[i - 1])
                    if j:
                        cl.append(-b[j - 1])
                    self.add(cl)
                if down and k + 1 <= n:
                    # sum_a <= i and sum_b <= j  ->  sum <= i+j
                    cl = [-o[k]]
                    if i < len(a):
                        cl.append(a[i])
                    if j < len(b):
                        cl.append(b[j])
                    self.add(cl)
        return o

    def exactly(self, lits, k):
        lits = list(lits)
        if k < 0 or k > len(lits):
            self.add([])
            return
        if k == 0:
            for l in lits:
                self.add([-l])
            return
        o = self.totalizer(lits, k + 1)
        self.add([o[k - 1]])
        if len(o) > k:
            self.add([-o[k]])


def encode(n, extra_age=0):
    m = n - 1
    sig = m
    K = (n - 1).bit_length()
    L = m - 1 + K
    f = CNF()
    x = {}
    win = {}
    for c in range(m):
        hi = c + K + extra_age if c < m - K else L - 1
        hi = min(hi, L - 1)
        win[c] = range(c + 1, hi + 1)
    for r in range(m):
        for c in range(m):
            if c == r:
                continue
            for t in win[c]:
                if t == r:
                    continue
                x[r, c, t] = f.new()
    # each rank receives each chunk exactly once
    for r in range(m):
        for c in range(m):
            if c == r:
                continue
            lits = [x[r, c, t] for t in win[c] if (r, c, t) in x]
            f.add(lits)
            f.amo(lits)
    # at most one receive per rank and round
    for r in range(m):
        for t in range(L):
            f.amo([x[r, c, t] for c in range(m) if (r, c, t) in x])
    # hold[r,c,t]: holds at start of round t (t = c+1 .. L)
    TRUE = f.new()
    f.add([TRUE])
    FALSE = -TRUE
    hold = {}
    for r in range(m):
        for c in range(m):
            for t in range(c + 1, L + 1):
                if c == r:
                    hold[r, c, t] = TRUE
                    continue
                if t == c + 1:
                    hold[r, c, t] = FALSE
                    continue
                prev = hold[r, c, t - 1]
                xv = x.get((r, c, t - 1))
                if xv is None:
                    hold[r, c, t] = prev
                    continue
                if prev == FALSE:
                    hold[r, c, t] = xv
                    continue
                h = f.new()
                f.add([-h, prev, xv])
                f.add([h, -prev])
                f.add([h, -xv])
                hold[r, c, t] = h
    # steady rounds t < m
    for t in range(m):
        for r in range(m):
            young = [hold[r, c, t] for c in range(max(0, t - K + 1), t)]
            young = [v for v in young if v != FALSE]
            if t == r:
                for v in young:
                    f.add([-v])
                continue
            f.amo(young)
            if t >= K:
                f.add(young + [hold[r, t - K, t]])
    # binomial counts in steady rounds
    for c in range(m):
        for a in range(1, K):
            t = c + a
            if t >= m:
                break
            f.exactly([x[r, c, t] for r in range(m) if (r, c, t) in x], 1 << (a - 1))
    # tail rounds: generic
    z = {}
    for t in range(m, L):
        for c in range(max(0, m - K), m):
            for r in range(m + 1):
                if r == sig:
                    z[r, c, t] = f.new()
                    continue
                hv = hold[r, c, t]
                if hv == FALSE:
                    continue
                v = f.new()
                z[r, c, t] = v
                if hv != TRUE:
                    f.add([-v, hv])
        for r in range(m + 1):
            f.amo([z[r, c, t] for c in range(max(0, m - K), m) if (r, c, t) in z])
        for c in range(max(0, m - K), m):
            rec = [x[r, c, t] for r in range(m) if (r, c, t) in x]
            snd = [z[r, c, t] for r in range(m + 1) if (r, c, t) in z]
            cap = min(len(rec), len(snd)) + 1
            orr = f.totalizer(rec, cap, up=True, down=False)
            oss = f.totalizer(snd, cap, up=False, down=True)
            for k in range(1, len(orr) + 1):
                if k > len(oss):
                    f.add([-orr[k - 1]])
                else:
                    f.add([-orr[k - 1], oss[k - 1]])
    return f, x, z, (m, K, L)


def write(f, fn):
    with open(fn, 'w') as fh:
        fh.write(f'p cnf {f.nv} {len(f.cl)}\n')
        for c in f.cl:
            fh.write(' '.join(map(str, c)) + ' 0\n')


def receive_times(x, solver_output):
    """Receive times (rank, chunk) -> round from a solver's 'v' lines."""
    vals = set()
    for line in open(solver_output):
        if line.startswith('v '):
            vals.update(int(tok) for tok in line[2:].split() if int(tok) > 0)
    return {(r, c): t for (r, c, t), v in x.items() if v in vals}


if __name__ == '__main__':
    # usage: stragglar_strict_sat.py N out.cnf [solver_output]
    #   without solver_output: write the CNF; with it: decode and check the model.
    n = int(sys.argv[1])
    f, x, z, info = encode(n)
    if len(sys.argv) > 3:
        import stragglar_flow_ilp as flow
        rounds = flow.moves_from_receive_times(n, receive_times(x, sys.argv[3]))
        flow.check(n, rounds)
        print(f'n={n}: valid schedule with {len(rounds)} rounds = L(n)', file=sys.stderr)
    else:
        write(f, sys.argv[2])
        print(f'n={n} (m, K, L)={info} vars={f.nv} clauses={len(f.cl)}', file=sys.stderr)
