#!/usr/bin/python3
"""Trains a small PyTorch Double-DQN agent on hetmem.gym.PlacementEnv.

    python3 python/examples/dqn_placement.py --summary app.summary.json --capacity mcdram=64M
    python3 python/examples/dqn_placement.py app.ddr.hmt app.mcdram.hmt --capacity mcdram=16M --episodes 400

The environment is the C estimator (hetmem.gym); the agent is plain PyTorch:
an MLP Q-network over the environment's observation, Double-DQN targets
(online network picks, target network scores), experience replay, an
epsilon-greedy policy restricted to the feasible devices (the action mask).
At the end it plays one greedy episode and reports the estimated runtime of
that placement and of the best episode seen, next to the C searches on the
same estimator and capacities: greedy, the C rl agent (20000 estimator
calls), exhaustive (when at most 24 units), first touch, and all on the
fallback device; the gap closed is measured against exhaustive, or else the
best of them. --smoke: a few episodes, for
tests. --json: one JSON object instead of the table.
"""
import argparse
import json
import os
import random
import sys
import time

import numpy as np
import torch
import torch.nn as nn

# Run from a source tree, the example uses the package beside it
# (python/hetmem), which finds build/lib/libhetmem.so by itself.
_PYTHON = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if os.path.isfile(os.path.join(_PYTHON, "hetmem", "__init__.py")) and _PYTHON not in sys.path:
    sys.path.insert(0, _PYTHON)

from hetmem.estimate import Estimator, HetmemError
from hetmem.gym import PlacementEnv
from hetmem.optimize import optimize, reference


def parse_size(text):
    """A capacity as hetmem optimize and hetmem run take it: bytes with an
    optional K/M/G/T suffix; without a suffix at least a page, so that
    "mcdram=64" is not taken as 64 bytes. Percentages are refused, as there."""
    t = text.strip()
    if t.endswith("%"):
        raise ValueError("%s: a percentage is not a size: give bytes with a K/M/G/T suffix" % t)
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}.get(t[-1:].upper(), 1)
    try:
        v = float(t[:-1] if mult > 1 else t)
    except ValueError:
        raise ValueError("%s: not a size (e.g. 512M, 16G)" % t) from None
    if v < 0:
        raise ValueError("%s: not a size (e.g. 512M, 16G)" % t)
    if mult == 1 and 0 < v < 4096:
        raise ValueError("%s bytes is smaller than a page; did you mean %sM?" % (t, t))
    return int(v * mult)


class QNet(nn.Module):
    def __init__(self, nobs, nact, hidden=64):
        super().__init__()
        self.f = nn.Sequential(nn.Linear(nobs, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                               nn.Linear(hidden, nact))

    def forward(self, x):
        return self.f(x)


def masked_argmax(q, mask):
    q = q.masked_fill(~mask, float("-inf"))
    return int(q.argmax())


def train(env, episodes, seed, gamma=1.0, lr=1e-3, batch=64, buffer=20000, target_every=100):
    torch.manual_seed(seed)
    rng = random.Random(seed)
    nobs, nact = env.observation_space.shape[0], env.action_space.n
    qn, qt = QNet(nobs, nact), QNet(nobs, nact)
    qt.load_state_dict(qn.state_dict())
    opt = torch.optim.Adam(qn.parameters(), lr=lr)
    mem, steps = [], 0
    best_t, best_pl, returns = float("inf"), None, []
    for ep in range(episodes):
        eps = max(0.05, 1.0 - ep / max(1, 0.6 * episodes))
        obs, info = env.reset(seed=seed + ep)
        mask = info["action_mask"]
        total, term = 0.0, False
        while not term:
            m = torch.tensor(mask, dtype=torch.bool)
            if rng.random() < eps:
                a = rng.choice([i for i in range(nact) if mask[i]])
            else:
                with torch.no_grad():
                    a = masked_argmax(qn(torch.as_tensor(obs)), m)
            obs2, r, term, trunc, info = env.step(a)
            mask2 = info["action_mask"]
            mem.append((obs, a, r, obs2, mask2, term))
            if len(mem) > buffer:
                mem.pop(rng.randrange(len(mem)))
            obs, mask, total = obs2, mask2, total + r
            steps += 1
            if len(mem) >= batch:
                b = rng.sample(mem, batch)
                s = torch.as_tensor(np.stack([x[0] for x in b]))
                a_ = torch.tensor([x[1] for x in b])
                r_ = torch.tensor([x[2] for x in b], dtype=torch.float32)
                s2 = torch.as_tensor(np.stack([x[3] for x in b]))
                m2 = torch.tensor([x[4] for x in b], dtype=torch.bool)
                done = torch.tensor([x[5] for x in b], dtype=torch.float32)
                with torch.no_grad():
                    # Double DQN: the online network chooses, the target network values.
                    a2 = qn(s2).masked_fill(~m2, float("-inf")).argmax(1, keepdim=True)
                    a2 = torch.where(m2.any(1, keepdim=True), a2, torch.zeros_like(a2))
                    y = r_ + gamma * (1 - done) * qt(s2).gather(1, a2).squeeze(1)
                q = qn(s).gather(1, a_.unsqueeze(1)).squeeze(1)
                loss = nn.functional.smooth_l1_loss(q, y)
                opt.zero_grad()
                loss.backward()
                opt.step()
            if steps % target_every == 0:
                qt.load_state_dict(qn.state_dict())
        returns.append(total)
        if env.runtime_s < best_t:
            best_t, best_pl = env.runtime_s, env.placement()
    # the learnt policy, played greedily
    obs, info = env.reset()
    term = False
    while not term:
        with torch.no_grad():
            a = masked_argmax(qn(torch.as_tensor(obs)), torch.tensor(info["action_mask"], dtype=torch.bool))
        obs, r, term, trunc, info = env.step(a)
    return {"greedy_policy_s": env.runtime_s, "greedy_policy_placement": env.placement(), "best_episode_s": best_t,
            "best_episode_placement": best_pl, "returns": returns}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("traces", nargs="*", help="one trace per device (or --summary)")
    ap.add_argument("--summary", help="a saved estimator summary")
    ap.add_argument("--capacity", action="append", default=[], metavar="DEV=SIZE",
                    help="bytes on DEV (K/M/G/T suffixes; without one, at least a page); repeat per device")
    ap.add_argument("--model", default="default", choices=["default", "linear"])
    ap.add_argument("--phased", action="store_true", help="one device per (phase, object)")
    ap.add_argument("--episodes", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--smoke", action="store_true", help="20 episodes (a quick check)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    if bool(a.traces) == bool(a.summary):
        ap.error("give either traces or --summary")
    try:
        est = Estimator(traces=a.traces or None, summary=a.summary)
        caps = {}
        for c in a.capacity:
            dev, eq, size = c.partition("=")
            if not eq:
                ap.error("--capacity %r: expected DEV=SIZE" % c)
            try:
                caps[dev] = parse_size(size)
            except ValueError as e:
                ap.error("--capacity %s: %s" % (c, e))
        env = PlacementEnv(estimator=est, capacity=caps, model=a.model, phased=a.phased)
        t0 = time.time()
        r = train(env, 20 if a.smoke else a.episodes, a.seed)
        wall = time.time() - t0
        kw = dict(capacity=caps, model=a.model, phased=a.phased)
        g = optimize(est, "greedy", **kw)
        rl = optimize(est, "rl", budget=20000, **kw)
        ex = optimize(est, "exhaustive", **kw) if len(env.units) <= 24 else None
        ft = reference(est, "first_touch", **kw)
    except (HetmemError, ValueError) as e:
        sys.exit("dqn_placement: %s" % e)
    base = env.base_runtime_s
    oracle = ex["runtime_s"] if ex else min(g["runtime_s"], rl["runtime_s"], r["best_episode_s"], r["greedy_policy_s"])

    def gap(t):
        return (base - t) / (base - oracle) if base - oracle > 1e-12 * base else None

    out = {"units": len(env.units), "episodes": len(r["returns"]), "train_wall_s": wall,
           "estimator_calls": env.calls, "all_fallback_s": base,
           "dqn_policy_s": r["greedy_policy_s"], "dqn_best_episode_s": r["best_episode_s"],
           "greedy_s": g["runtime_s"], "rl_s": rl["runtime_s"], "exhaustive_s": ex["runtime_s"] if ex else None,
           "first_touch_s": ft["runtime_s"], "oracle": "exhaustive" if ex else "best found",
           "gap_closed": {k: gap(v) for k, v in (("dqn_policy", r["greedy_policy_s"]),
                                                  ("dqn_best_episode", r["best_episode_s"]),
                                                  ("greedy", g["runtime_s"]), ("rl", rl["runtime_s"]),
                                                  ("first_touch", ft["runtime_s"]))},
           "placement": r["greedy_policy_placement"]}
    if a.json:
        print(json.dumps(out, indent=2))
        return
    print("DQN on %d units, %d episodes, %.1f s, %d estimator calls" % (out["units"], out["episodes"], wall, env.calls))
    print("  %-22s %12s %12s" % ("placement", "estimate s", "gap closed"))
    rows = [("all on fallback", base, 0.0), ("dqn (learnt policy)", r["greedy_policy_s"], gap(r["greedy_policy_s"])),
            ("dqn (best episode)", r["best_episode_s"], gap(r["best_episode_s"])),
            ("greedy (C)", g["runtime_s"], gap(g["runtime_s"])), ("rl (C, 20000 calls)", rl["runtime_s"], gap(rl["runtime_s"])),
            ("first touch", ft["runtime_s"], gap(ft["runtime_s"]))]
    if ex:
        rows.append(("exhaustive (C)", ex["runtime_s"], 1.0))
    for name, t, gp in rows:
        print("  %-22s %12.6f %12s" % (name, t, "n/a" if gp is None else "%.1f%%" % (100 * gp)))


if __name__ == "__main__":
    main()
