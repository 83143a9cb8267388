#!/usr/bin/env python3
"""Offline search for StragglAR post-arrival schedules with exactly L(n) rounds (integer flow).

Canonical labelling: ranks 0..m-1 plus the straggler sigma = m, chunks 0..m-1, m = n-1,
K = ceil(log2 n), L = m-1+K rounds (0..L-1). In round r < m, rank r and sigma exchange chunk r.

"Strict" model (the slack of the problem is 2^K - n receive slots beyond the unavoidable start-up
losses; here none may be lost before round m, so the whole slack goes to the last K-1 "tail"
rounds): every chunk then spreads as a binomial tree, exactly 2^(a-1) copies at age a = 1..K-1
and m - 2^(K-1) at age K (for chunks whose age-K round is < m). Consequences in rounds t < m:
  * every holder of a chunk of age 1..K-1 ("young") forwards it, so a rank holds at most one young
    chunk, and the exchanging rank holds none;
  * a non-exchanging rank without a young chunk forwards the age-K chunk (t >= K), so it holds it.
With these rules the senders and receivers of every chunk match exactly, and the ranks interact
only through per-round counts. Each rank's life is a path in a small automaton:
  steady round t < m: state (e, M), e = already exchanged, bit i of M (i = 1..K) = holds chunk
    t-i (older chunks must all be held); moves: exchange / receive chunk t-a / receive nothing;
  tail round t >= m: state = set of held chunks among the last K; move = (receive c, send c').
An integer flow of m units through this layered graph with
  steady: exactly one exchange per round, 2^(a-1) receivers of age a < K, m - 2^(K-1) of age K;
  tail:   receivers(c, t) <= senders(c, t) + sigma_sends(c, t), sigma sends <= 1 per round,
is therefore a schedule: decompose the flow into m paths; the path whose exchange arc lies in
round r is rank r. Senders are re-derived per round by bipartite matching, and the result is
checked independently (ports, finality, completeness, L(n) rounds).

The ILP has a few thousand integer variables (n = 63: 4,697 arcs) and CBC solves it in well under
a second. Requires coinor-cbc (`apt-get install coinor-cbc`); Python 3 standard library only.

usage: stragglar_flow_ilp.py N [--workdir DIR] [--rows] [--cpp] [--moves FILE]
  --rows   print one receive row per rank: char t = age of the chunk received in round t
           ('1'..'9', 'a' = 10, ...; chunk = t - age), '.' = nothing (or the exchange round)
  --cpp    print the rows as a C++ initializer (the format of kernels/synth/stragglar_schedule.cc)
  --moves  write the full move list, one line per round: "src>dst:chunk ..."
"""
import argparse
import os
import subprocess
import sys
from collections import defaultdict


def params(n):
    m = n - 1
    k = (n - 1).bit_length()  # ceil(log2 n)
    return m, k, m - 1 + k


def build_arcs(n):
    """Arcs (t, src_state, dst_state, label) of the layered state graph."""
    m, k, num_rounds = params(n)
    young_mask = (1 << k) - 2  # bits 1..K-1
    bit_k = 1 << k
    arcs = []
    states = {(0, 0)}
    for t in range(m):
        nxt = set()
        for (e, mask) in sorted(states):
            young = mask & young_mask
            if bin(young).count('1') > 1:
                continue

            def shifted(mask2, own):
                if t - k >= 0 and not mask2 & bit_k:
                    return None  # chunk t-K must be held after round t
                return ((mask2 << 1) & ((1 << (k + 1)) - 1) & ~1) | (2 if own else 0)

            if e == 0 and young == 0:
                mask2 = shifted(mask, True)
                if mask2 is not None:
                    arcs.append((t, (e, mask), (1, mask2), ('x',)))
                    nxt.add((1, mask2))
            if t >= k and young == 0 and not mask & bit_k:
                continue  # a free sender must hold the age-K chunk
            mask2 = shifted(mask, False)
            if mask2 is not None:
                arcs.append((t, (e, mask), (e, mask2), ('i',)))
                nxt.add((e, mask2))
            for a in range(1, k + 1):
                if t - a < 0 or (mask >> a) & 1:
                    continue
                mask2 = shifted(mask | (1 << a), False)
                if mask2 is None:
                    continue
                arcs.append((t, (e, mask), (e, mask2), ('r', a)))
                nxt.add((e, mask2))
        states = nxt
    tail_states = set()
    for (e, mask) in states:
        if e == 1 and bin(mask & young_mask).count('1') <= 1:
            tail_states.add(to_tail(k, mask)[1])
    for t in range(m, num_rounds):
        nxt = set()
        for held in sorted(tail_states):
            if k - bin(held).count('1') > num_rounds - t:
                continue
            recvs = [None] + [j for j in range(k) if not (held >> j) & 1]
            sends = [None] + [j for j in range(k) if (held >> j) & 1]
            for rj in recvs:
                held2 = held | (1 << rj) if rj is not None else held
                if k - bin(held2).count('1') > num_rounds - t - 1:
                    continue
                for sj in sends:
                    arcs.append((t, ('T', held), ('T', held2), ('t', rj, sj)))
                    nxt.add(held2)
        tail_states = nxt
    return arcs


def to_tail(k, mask):
    """Steady state bit i (chunk m-i) -> tail bit j = K-i (chunk m-K+j)."""
    held = 0
    for i in range(1, k + 1):
        if (mask >> i) & 1:
            held |= 1 << (k - i)
    return ('T', held)


def write_lp(n, arcs, path):
    m, k, num_rounds = params(n)
    lines = ['Minimize', ' obj: 0 f0', 'Subject To']
    out_arcs, in_arcs = defaultdict(list), defaultdict(list)
    for i, (t, s, d, _) in enumerate(arcs):
        out_arcs[t, s].append(i)
        # steady states reaching round m continue as tail states
        in_arcs[t + 1, to_tail(k, d[1]) if t + 1 == m and d[0] != 'T' else d].append(i)
    counter = [0]

    def con(body, op, rhs):
        counter[0] += 1
        lines.append(f' c{counter[0]}: {body or "0 f0"} {op} {rhs}')

    full = ('T', (1 << k) - 1)
    for node in sorted(set(out_arcs) | set(in_arcs), key=str):
        t, s = node
        body = ' '.join([f'+ f{i}' for i in in_arcs.get(node, [])] +
                        [f'- f{i}' for i in out_arcs.get(node, [])])
        if t == 0:
            con(body, '=', -m if s == (0, 0) else 0)
        elif t == num_rounds:
            con(body, '=', m if s == full else 0)
        else:
            con(body, '=', 0)
    by_label = defaultdict(list)
    for i, (t, _, _, lab) in enumerate(arcs):
        by_label[t, lab[:2] if lab[0] != 't' else ('t',)].append(i)
    for t in range(m):
        con(' '.join(f'+ f{i}' for i in by_label[t, ('x',)]), '=', 1)
        for a in range(1, k + 1):
            if t - a >= 0:
                want = (1 << (a - 1)) if a < k else m - (1 << (k - 1))
                con(' '.join(f'+ f{i}' for i in by_label[t, ('r', a)]), '=', want)
    sigma_vars = []
    for t in range(m, num_rounds):
        names = [f's{t}_{j}' for j in range(k)]
        for j in range(k):
            rec = [i for i in by_label[t, ('t',)] if arcs[i][3][1] == j]
            snd = [i for i in by_label[t, ('t',)] if arcs[i][3][2] == j]
            con(' '.join([f'+ f{i}' for i in rec] + [f'- f{i}' for i in snd] + [f'- {names[j]}']),
                '<=', 0)
        con(' '.join(f'+ {v}' for v in names), '<=', 1)
        sigma_vars += names
    lines.append('Bounds')
    lines += [f' 0 <= f{i} <= {m}' for i in range(len(arcs))]
    lines += [f' 0 <= {v} <= 1' for v in sigma_vars]
    lines.append('General')
    lines.append(' ' + ' '.join(f'f{i}' for i in range(len(arcs))))
    lines.append(' ' + ' '.join(sigma_vars))
    lines.append('End')
    with open(path, 'w') as fh:
        fh.write('\n'.join(lines) + '\n')


def run_cbc(lp_path, sol_path, seconds):
    proc = subprocess.run(['cbc', lp_path, 'sec', str(seconds), 'solve', 'solu', sol_path],
                          capture_output=True, text=True)
    with open(sol_path) as fh:
        status = fh.readline().strip()
        values = {}
        for line in fh:
            tok = line.replace('**', ' ').split()  # CBC marks infeasible rows with '**'
            if len(tok) >= 3:
                values[tok[1]] = round(float(tok[2]))
    return status, values, proc.stdout


def decompose(n, arcs, flow):
    """Splits the integer flow into m paths; returns receive_time[(rank, chunk)] = round."""
    m, k, num_rounds = params(n)
    flow = list(flow)
    out_arcs = defaultdict(list)
    for i, (t, s, _, _) in enumerate(arcs):
        out_arcs[t, s].append(i)
    receive_time = {}
    for _ in range(m):
        t, s, path = 0, (0, 0), []
        while t < num_rounds:
            if t == m and s[0] != 'T':
                s = to_tail(k, s[1])
            i = next(i for i in out_arcs[t, s] if flow[i] > 0)
            flow[i] -= 1
            path.append(i)
            s = arcs[i][2]
            t += 1
        rank = next(arcs[i][0] for i in path if arcs[i][3] == ('x',))
        for i in path:
            t, _, _, lab = arcs[i]
            if lab[0] == 'r':
                receive_time[rank, t - lab[1]] = t
            elif lab[0] == 't' and lab[1] is not None:
                receive_time[rank, m - k + lab[1]] = t
    return receive_time


def moves_from_receive_times(n, receive_time):
    """Exchanges plus, per round, a bipartite matching receivers -> holders (Kuhn)."""
    m, _, num_rounds = params(n)
    sigma = m
    holds = [set() for _ in range(n)]
    rounds = []
    for t in range(num_rounds):
        moves = [(t, sigma, t), (sigma, t, t)] if t < m else []
        busy = {t, sigma} if t < m else set()
        need = sorted((r, c) for (r, c), tt in receive_time.items() if tt == t)
        cand = {key: [s for s in range(n) if s not in busy and key[1] in holds[s]] for key in need}
        owner = {}

        def augment(key, seen):
            for s in cand[key]:
                if s not in seen:
                    seen.add(s)
                    if s not in owner or augment(owner[s], seen):
                        owner[s] = key
                        return True
            return False

        for key in need:
            if not augment(key, set()):
                raise RuntimeError(f'round {t}: nobody can send chunk {key[1]} to rank {key[0]}')
        moves += [(s, r, c) for s, (r, c) in sorted(owner.items())]
        for (_, r, c) in moves:
            holds[r].add(c)
        rounds.append(moves)
    return rounds


def check(n, rounds):
    """Independent check; raises AssertionError on any violation."""
    m, _, num_rounds = params(n)
    sigma = m
    assert len(rounds) == num_rounds, ('rounds', len(rounds), num_rounds)
    holds = [set() for _ in range(n)]
    for t, moves in enumerate(rounds):
        senders, receivers, exchange = set(), set(), 0
        for (s, r, c) in moves:
            assert 0 <= s < n and 0 <= r < n and s != r and 0 <= c < m, (t, s, r, c)
            assert s not in senders and r not in receivers, ('port reused', t, s, r)
            senders.add(s)
            receivers.add(r)
            if t < m and c == t and {s, r} == {t, sigma}:
                exchange += 1
                continue
            assert t >= m or sigma not in (s, r), ('straggler busy', t)
            assert c in holds[s], ('sender lacks final chunk', t, s, r, c)
            assert c not in holds[r], ('receiver already holds chunk', t, s, r, c)
        assert exchange == (2 if t < m else 0), ('exchange', t)
        for (_, r, c) in moves:
            holds[r].add(c)
    for r in range(n):
        assert holds[r] == set(range(m)), ('incomplete', r)


def receive_rows(n, receive_time):
    m, _, num_rounds = params(n)
    rows = []
    for r in range(m):
        row = ['.'] * num_rounds
        for c in range(m):
            if c != r:
                t = receive_time[r, c]
                age = t - c
                row[t] = str(age) if age < 10 else chr(ord('a') + age - 10)
        rows.append(''.join(row))
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('n', type=int)
    ap.add_argument('--workdir', default='/tmp/stragglar_flow')
    ap.add_argument('--seconds', type=int, default=600)
    ap.add_argument('--rows', action='store_true')
    ap.add_argument('--cpp', action='store_true')
    ap.add_argument('--moves')
    args = ap.parse_args()
    n = args.n
    os.makedirs(args.workdir, exist_ok=True)
    arcs = build_arcs(n)
    lp_path = os.path.join(args.workdir, f'n{n}.lp')
    sol_path = os.path.join(args.workdir, f'n{n}.sol')
    write_lp(n, arcs, lp_path)
    status, values, _ = run_cbc(lp_path, sol_path, args.seconds)
    print(f'n={n} arcs={len(arcs)} cbc: {status}', file=sys.stderr)
    if not status.startswith('Optimal'):
        sys.exit(1)
    receive_time = decompose(n, arcs, [values.get(f'f{i}', 0) for i in range(len(arcs))])
    rounds = moves_from_receive_times(n, receive_time)
    check(n, rounds)
    print(f'n={n}: valid schedule with {len(rounds)} rounds = L(n)', file=sys.stderr)
    rows = receive_rows(n, receive_time)
    if args.rows:
        print('\n'.join(rows))
    if args.cpp:
        print(f'constexpr const char* kReceiveRows{n}[] = {{')
        for row in rows:
            print(f'    "{row}",')
        print('};')
    if args.moves:
        with open(args.moves, 'w') as fh:
            for moves in rounds:
                fh.write(' '.join(f'{s}>{r}:{c}' for s, r, c in moves) + '\n')


if __name__ == '__main__':
    main()
