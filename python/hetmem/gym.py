"""A Gymnasium-style environment for data placement, backed by the C estimator.

    from hetmem.gym import PlacementEnv
    env = PlacementEnv(summary="app.summary.json", capacity={"mcdram": 64 << 20})
    obs, info = env.reset(seed=0)
    while True:
        action = policy(obs, info["action_mask"])          # a device index
        obs, reward, terminated, truncated, info = env.step(action)
        if terminated:
            break
    info["runtime_s"], env.placement()

An episode decides the units one at a time, as the C agent does
(docs/optimizer.md): a unit is a movable object, or with phased=True a
(phase label, object) pair. Every unit starts on the fallback device (the
estimator's default device, or the slowest device that holds the footprint
when the default one is capped below it); the action is the device the
current unit goes to. An action whose device has no room for the unit is not
taken: the unit stays on the fallback and info["invalid"] is set
(info["action_mask"] tells the feasible ones beforehand, the fallback always
is). Capacities therefore hold at every step.

Reward: the estimated runtime the step saved, in percent of the all-fallback
runtime, 100 * (T_before - T_after) / T_fallback, from the C estimator's
incremental state (migration at phase boundaries included when phased). The
return of an episode is the total saving in percent.

Observation (float32, 5 + 3 * devices values) for the current unit:
size / footprint; log(1 + sample density / mean density); phase label /
phase labels (0 unphased); step / units; bytes still undecided / footprint;
then per device: the unit's single-move saving on it (percent of the
all-fallback runtime), room left / capacity (1 when unlimited), and 1 if the
unit fits there now, else 0. After the last step the observation is zeros.

With gymnasium importable, PlacementEnv is a gymnasium.Env with
gymnasium.spaces.Box / Discrete spaces and is registered as
"hetmem/Placement-v0" (gymnasium.make("hetmem/Placement-v0", summary=...)).
Without it, the same class works with minimal equivalents of Box and
Discrete (shape, dtype, n, sample(), contains(), seed()).
"""
import ctypes
import math
import random

from .estimate import Estimator, _check

try:
    import numpy as _np
except ImportError:  # pragma: no cover - numpy comes with gymnasium and torch
    _np = None

try:
    import gymnasium as _gym
    from gymnasium import spaces as _spaces
except ImportError:
    _gym = None
    _spaces = None

__all__ = ["PlacementEnv", "Box", "Discrete", "ENV_ID", "HAVE_GYMNASIUM"]

ENV_ID = "hetmem/Placement-v0"
HAVE_GYMNASIUM = _gym is not None
UNLIMITED = (1 << 64) - 1


class Discrete:
    """Minimal stand-in for gymnasium.spaces.Discrete: integers 0..n-1."""

    def __init__(self, n, seed=None):
        self.n = int(n)
        self.shape = ()
        self.dtype = "int64"
        self._rng = random.Random(seed)

    def seed(self, seed=None):
        self._rng = random.Random(seed)
        return [seed]

    def sample(self, mask=None):
        choices = [i for i in range(self.n) if mask is None or mask[i]]
        return self._rng.choice(choices)

    def contains(self, x):
        try:
            return int(x) == x and 0 <= int(x) < self.n
        except (TypeError, ValueError):
            return False

    def __repr__(self):
        return "Discrete(%d)" % self.n


class Box:
    """Minimal stand-in for gymnasium.spaces.Box: float vectors in [low, high]."""

    def __init__(self, low, high, shape, dtype="float32", seed=None):
        self.low, self.high, self.shape, self.dtype = float(low), float(high), tuple(shape), dtype
        self._rng = random.Random(seed)

    def seed(self, seed=None):
        self._rng = random.Random(seed)
        return [seed]

    def sample(self):
        lo, hi = max(self.low, -1e3), min(self.high, 1e3)
        v = [self._rng.uniform(lo, hi) for _ in range(self.shape[0])]
        return _np.asarray(v, dtype=_np.float32) if _np is not None else v

    def contains(self, x):
        try:
            return len(x) == self.shape[0] and all(self.low <= float(v) <= self.high for v in x)
        except TypeError:
            return False

    def __repr__(self):
        return "Box(%g, %g, %s, %s)" % (self.low, self.high, self.shape, self.dtype)


_Base = _gym.Env if HAVE_GYMNASIUM else object


class PlacementEnv(_Base):
    """Placement of one program's objects under per-device capacities.

    Give the estimator as traces (one per device), a saved summary, or an
    open hetmem.estimate.Estimator. capacity: {device: bytes}; devices left
    out keep the capacity recorded in the traces (0 there: no limit). A
    capacity larger than the device's, or an unknown device, raises
    ValueError; so does a footprint no device can hold.
    """

    metadata = {"render_modes": []}

    def __init__(self, traces=None, summary=None, estimator=None, capacity=None, model="default", phased=False):
        if estimator is None:
            estimator = Estimator(traces=traces, summary=summary)
        self.est = estimator
        self.model, self.phased = model, bool(phased)
        self.devices = self.est.devices
        nd = len(self.devices)
        if nd < 2:
            raise ValueError("the estimator needs at least two devices")
        objs = [o for o in self.est.objects if o["movable"]]
        self.footprint = sum(o["size"] for o in objs)
        # Capacities, checked as hm_optimize_run() does.
        cap = []
        for d in self.devices:
            dc = self.est.capacity(d)
            cap.append(dc if dc else UNLIMITED)
        for d, c in (capacity or {}).items():
            i = self.est.device_index(d)
            c = int(c)
            if c < 0:
                raise ValueError("%s: capacity %d is negative" % (d, c))
            dc = self.est.capacity(i)
            if dc and c > dc:
                raise ValueError("%s: capacity %d is larger than the device's %d" % (self.devices[i], c, dc))
            cap[i] = c
        self.capacity = dict(zip(self.devices, cap))
        self._cap = cap
        speed = sorted(range(nd), key=lambda d: self.est.measured_s(d))
        self.speed = [self.devices[d] for d in speed]
        fb = self.devices.index(self.est.default_device)
        if cap[fb] != UNLIMITED and self.footprint > cap[fb]:
            fb = next((d for d in reversed(speed) if cap[d] == UNLIMITED or self.footprint <= cap[d]), None)
            if fb is None:
                raise ValueError("no device can hold the footprint of %d bytes" % self.footprint)
        self.fallback = fb
        phases = self.est.phases if self.phased else [None]
        self.nphases = len(phases)
        # The all-fallback state, kept to reset from; single-move savings cost
        # two estimator calls per (unit, other device), once.
        self.calls = 0
        self._base = self.est.state(model, self.phased)
        for o in objs:
            if self.devices.index(self.est.default_device) != fb:
                self._base.move(o["index"], fb)
                self.calls += 1
        self.base_runtime_s = self._base.runtime_s
        mean_density = sum(o["samples"] for o in objs) / max(1, self.footprint)
        units = []
        for p in range(self.nphases):
            for o in objs:
                sav = [0.0] * nd
                for d in range(nd):
                    if d == fb:
                        continue
                    t = self._base.move(o["index"], d, phase=p if self.phased else None)
                    self._base.move(o["index"], fb, phase=p if self.phased else None)
                    self.calls += 2
                    sav[d] = 100.0 * (self.base_runtime_s - t) / self.base_runtime_s
                dens = o["samples"] / max(1, o["size"])
                units.append({"object": o["index"], "name": o["name"], "site": o["site"], "size": o["size"],
                              "phase": p if self.phased else None, "saving_pct": sav,
                              "density": math.log1p(dens / mean_density) if mean_density > 0 else 0.0})
        # Phase by phase; within one, best single saving per byte first.
        units.sort(key=lambda u: (u["phase"] or 0, -max(u["saving_pct"]) / max(1, u["size"])))
        self.units = units
        nobs = 5 + 3 * nd
        if HAVE_GYMNASIUM:
            self.action_space = _spaces.Discrete(nd)
            self.observation_space = _spaces.Box(-_np.inf, _np.inf, shape=(nobs,), dtype=_np.float32)
        else:
            self.action_space = Discrete(nd)
            self.observation_space = Box(-math.inf, math.inf, (nobs,))
        self._state = None
        self._step = 0

    # -- state ---------------------------------------------------------------
    def _used_init(self):
        used = [[0] * len(self.devices) for _ in range(self.nphases)]
        for row in used:
            row[self.fallback] = self.footprint
        return used

    def _fits(self, u, d):
        if d == self.fallback or self._cap[d] == UNLIMITED:
            return True
        return self._used[u["phase"] or 0][d] + u["size"] <= self._cap[d]

    def action_mask(self):
        """Feasible devices for the current unit (1/0 per device); all zero after the last step."""
        if self._step >= len(self.units):
            return [0] * len(self.devices)
        u = self.units[self._step]
        return [1 if self._fits(u, d) else 0 for d in range(len(self.devices))]

    def _obs(self):
        nd = len(self.devices)
        if self._step >= len(self.units):
            v = [0.0] * (5 + 3 * nd)
        else:
            u = self.units[self._step]
            used = self._used[u["phase"] or 0]
            v = [u["size"] / self.footprint, u["density"],
                 (u["phase"] or 0) / self.nphases if self.phased else 0.0,
                 self._step / len(self.units), self._undecided / self.footprint]
            for d in range(nd):
                room = 1.0 if self._cap[d] == UNLIMITED else \
                    max(0, self._cap[d] - used[d]) / max(1, self._cap[d])
                v += [u["saving_pct"][d], room, 1.0 if self._fits(u, d) else 0.0]
        return _np.asarray(v, dtype=_np.float32) if _np is not None else v

    def _info(self, invalid=False):
        info = {"runtime_s": self._state.runtime_s, "action_mask": self.action_mask(), "invalid": invalid,
                "step": self._step, "estimator_calls": self.calls}
        if self._step < len(self.units):
            u = self.units[self._step]
            info["unit"] = {"object": u["name"] or "0x%016x" % u["site"], "phase": u["phase"], "size": u["size"]}
        else:
            info["placement"] = self.placement()
        return info

    # -- Gymnasium API -------------------------------------------------------
    def reset(self, seed=None, options=None):
        """Starts an episode with every unit on the fallback device: (observation, info)."""
        if HAVE_GYMNASIUM:
            super().reset(seed=seed)
        if seed is not None:
            self.action_space.seed(seed)
        if self._state is None:
            self._state = self._base.copy()
        else:
            _check(self._state._lib, self._state._lib.hm_est_state_copy(self._state._h, self._base._h))
        self._used = self._used_init()
        self._undecided = sum(u["size"] for u in self.units)
        self._step = 0
        return self._obs(), self._info()

    def step(self, action):
        """Places the current unit on device `action`: (obs, reward, terminated, truncated, info)."""
        if self._state is None:
            raise RuntimeError("call reset() before step()")
        if self._step >= len(self.units):
            raise RuntimeError("the episode is over: call reset()")
        if not self.action_space.contains(action):
            raise ValueError("action %r is not a device index in [0, %d)" % (action, len(self.devices)))
        d = int(action)
        u = self.units[self._step]
        before = self._state.runtime_s
        invalid = not self._fits(u, d)
        if not invalid and d != self.fallback:
            self._state.move(u["object"], d, phase=u["phase"])
            self.calls += 1
            # The estimator's own byte count has the last word, as in the C search.
            if self._cap[d] != UNLIMITED and self._state.bytes_on(d) > self._cap[d]:
                self._state.move(u["object"], self.fallback, phase=u["phase"])
                self.calls += 1
                invalid = True
            else:
                row = self._used[u["phase"] or 0]
                row[self.fallback] -= u["size"]
                row[d] += u["size"]
        after = self._state.runtime_s
        self._undecided -= u["size"]
        self._step += 1
        reward = 100.0 * (before - after) / self.base_runtime_s
        terminated = self._step >= len(self.units)
        return self._obs(), reward, terminated, False, self._info(invalid)

    def render(self):
        return None

    def close(self):
        for s in (self._state, self._base):
            if s is not None:
                s.close()
        self._state = None

    # -- queries -------------------------------------------------------------
    @property
    def runtime_s(self):
        """Estimated runtime of the current assignment."""
        return (self._state or self._base).runtime_s

    def estimate(self):
        """Estimate of the current assignment: runtime_s, ci_s, migration_s."""
        return (self._state or self._base).estimate()

    def placement(self):
        """The current assignment as a placement-file dict."""
        return (self._state or self._base).placement()

    def bytes_on(self, device):
        """Bytes on a device (peak over phases when phased), by the estimator's count."""
        return (self._state or self._base).bytes_on(device)


if HAVE_GYMNASIUM:
    try:
        _gym.register(id=ENV_ID, entry_point="hetmem.gym:PlacementEnv")
    except Exception:  # pragma: no cover - already registered in this process
        pass
