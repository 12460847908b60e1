"""hetmem.gym.PlacementEnv against the C estimator and the C searches.

Synthetic summaries (synth.py) have known runtimes under the linear model,
so the environment's figures are checked against an independent formula,
against full estimates of its placement files, and its best episode against
a brute force and the exhaustive search.
"""
import itertools
import math
import random

import pytest

import synth
from hetmem import gym as hgym
from hetmem.estimate import Estimator, HetmemError
from hetmem.gym import PlacementEnv
from hetmem.optimize import optimize


@pytest.fixture
def make(tmp_path):
    def _make(nobj, ndev, seed, nph=1):
        inst = synth.instance(nobj, ndev, seed, nph=nph)
        p = tmp_path / ("s%d-%d-%d-%d.json" % (nobj, ndev, seed, nph))
        p.write_text(synth.summary(inst))
        return inst, Estimator(summary=str(p))
    return _make


def where_of(env, inst):
    """Device index of each synthetic object in the env's placement."""
    pl = env.placement()
    dev = {r["name"]: env.devices.index(r["device"]) for r in pl.get("rules", [])}
    return [dev.get("obj%d" % i, env.devices.index(pl["default"])) for i in range(len(inst["objects"]))]


def play(env, actions):
    obs, info = env.reset()
    total, infos = 0.0, [info]
    for a in actions:
        obs, r, term, trunc, info = env.step(a)
        total += r
        infos.append(info)
        if term:
            break
    assert term and not trunc
    return total, infos


@pytest.mark.parametrize("ndev", [2, 3])
def test_runtime_matches_estimator(make, ndev):
    inst, est = make(8, ndev, 11 + ndev)
    foot = sum(o["size"] for o in inst["objects"])
    env = PlacementEnv(estimator=est, capacity={d: foot // 3 for d in est.devices[1:]}, model="linear")
    assert env.base_runtime_s == pytest.approx(synth.runtime_ns(inst, [0] * 8) / 1e9, rel=1e-9)
    rng = random.Random(5)
    for _ in range(20):
        total, infos = play(env, [rng.randrange(ndev) for _ in env.units])
        t = env.runtime_s
        # the incremental state, the known formula and a full estimate of the placement file agree
        assert t == pytest.approx(synth.runtime_ns(inst, where_of(env, inst)) / 1e9, rel=1e-9)
        assert t == pytest.approx(est.estimate(env.placement(), model="linear")["runtime_s"], rel=1e-9)
        assert infos[-1]["runtime_s"] == pytest.approx(t, rel=1e-12)
        # the return is the total saving in percent of the all-fallback runtime
        assert total == pytest.approx(100 * (env.base_runtime_s - t) / env.base_runtime_s, abs=1e-9)


def test_default_model_matches_full_estimate(make):
    inst, est = make(7, 3, 3)
    foot = sum(o["size"] for o in inst["objects"])
    env = PlacementEnv(estimator=est, capacity={"mid": foot // 2, "fast": foot // 4})
    rng = random.Random(1)
    for _ in range(10):
        play(env, [rng.randrange(3) for _ in env.units])
        assert env.runtime_s == pytest.approx(est.estimate(env.placement())["runtime_s"], rel=1e-9)


@pytest.mark.parametrize("ndev,phased", [(2, False), (3, False), (3, True)])
def test_capacities_hold(make, ndev, phased):
    inst, est = make(10, ndev, 21, nph=3 if phased else 1)
    foot = sum(o["size"] for o in inst["objects"])
    caps = {d: foot // (4 + i) for i, d in enumerate(est.devices[1:])}
    env = PlacementEnv(estimator=est, capacity=caps, model="linear", phased=phased)
    assert len(env.units) == 10 * (3 if phased else 1)
    rng = random.Random(2)
    invalid = 0
    for _ in range(30):
        env.reset()
        for u in env.units:
            mask = env.action_mask()
            assert mask[env.fallback] == 1
            a = rng.randrange(ndev)
            obs, r, term, trunc, info = env.step(a)
            invalid += info["invalid"]
            assert info["invalid"] == (mask[a] == 0), "the mask foretells refused actions"
            for d, c in caps.items():
                assert env.bytes_on(d) <= c, "%s holds %d > %d" % (d, env.bytes_on(d), c)
        assert term
    assert invalid > 0, "the capacities were tight enough to refuse some actions"


def test_best_episode_is_the_optimum(make):
    inst, est = make(6, 2, 7)
    foot = sum(o["size"] for o in inst["objects"])
    cap = foot // 4
    env = PlacementEnv(estimator=est, capacity={"fast": cap}, model="linear")
    best = min(env.runtime_s if play(env, acts) else None for acts in itertools.product(range(2), repeat=6))
    # brute force over the known formula
    brute = min(synth.runtime_ns(inst, w) for w in itertools.product(range(2), repeat=6)
                if sum(o["size"] for o, d in zip(inst["objects"], w) if d == 1) <= cap) / 1e9
    assert best == pytest.approx(brute, rel=1e-9)
    ex = optimize(est, "exhaustive", capacity={"fast": cap}, model="linear")
    assert ex["complete"] and ex["runtime_s"] == pytest.approx(brute, rel=1e-9)
    # greedy by saving per byte does not beat the optimum
    assert optimize(est, "greedy", capacity={"fast": cap}, model="linear")["runtime_s"] >= brute * (1 - 1e-12)
    # page splits (split=True, or a grid step) fill the room whole objects leave: never slower than
    # the whole-object optimum, and the grid step reaches the library
    sp = optimize(est, "exhaustive", capacity={"fast": cap}, model="linear", split=True)
    assert sp["runtime_s"] <= ex["runtime_s"] * (1 + 1e-12)
    with pytest.raises(HetmemError, match="split step 101% is not within 1..100"):
        optimize(est, "greedy", capacity={"fast": cap}, model="linear", split=101)


def test_phased_placement_file(make):
    inst, est = make(6, 2, 9, nph=3)
    foot = sum(o["size"] for o in inst["objects"])
    env = PlacementEnv(estimator=est, capacity={"fast": foot // 3}, phased=True)
    rng = random.Random(4)
    for _ in range(5):
        play(env, [rng.randrange(2) for _ in env.units])
        e = env.estimate()
        assert e["migration_s"] >= 0
        assert e["runtime_s"] == pytest.approx(est.estimate(env.placement())["runtime_s"], rel=1e-6)


def test_spaces_and_observations(make):
    inst, est = make(5, 3, 1)
    env = PlacementEnv(estimator=est, model="linear")
    assert env.action_space.n == 3
    obs, info = env.reset(seed=3)
    assert tuple(env.observation_space.shape) == (5 + 3 * 3,)
    assert len(obs) == 14 and env.observation_space.contains(obs)
    assert info["action_mask"] == [1, 1, 1] and "unit" in info
    # per-device saving features are the single-move savings: zero on the fallback
    u = env.units[0]
    assert obs[5] == 0 and obs[8] == pytest.approx(u["saving_pct"][1], rel=1e-6)
    assert u["saving_pct"][2] > u["saving_pct"][1] > 0
    # the minimal spaces used without gymnasium
    d, b = hgym.Discrete(3, seed=1), hgym.Box(-1, 1, (4,), seed=1)
    assert all(d.contains(d.sample()) for _ in range(20)) and not d.contains(3) and not d.contains(-1)
    assert d.sample(mask=[0, 0, 1]) == 2
    assert b.contains(b.sample()) and not b.contains([0, 0, 0, 2]) and not b.contains([0])


def test_registration():
    if not hgym.HAVE_GYMNASIUM:
        pytest.skip("gymnasium not installed")
    import gymnasium
    assert hgym.ENV_ID in gymnasium.registry


def test_bad_input(make):
    inst, est = make(4, 2, 2)
    with pytest.raises(ValueError, match="larger than the device"):
        PlacementEnv(estimator=est, capacity={"fast": 128 << 30})
    with pytest.raises(ValueError, match="not a device"):
        PlacementEnv(estimator=est, capacity={"hbm": 1 << 20})
    with pytest.raises(ValueError, match="no device can hold"):
        PlacementEnv(estimator=est, capacity={"slow": 1 << 20, "fast": 1 << 20})
    env = PlacementEnv(estimator=est, capacity={"fast": 1 << 20})
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)
    env.reset()
    with pytest.raises(ValueError, match="device index"):
        env.step(2)
    for _ in env.units:
        env.step(1)
    with pytest.raises(RuntimeError, match="over"):
        env.step(0)


def test_capped_default_uses_slowest_fallback(make):
    # the default (slowest) device capped below the footprint: the next
    # slowest device that holds everything becomes the fallback
    inst, est = make(5, 3, 8)
    foot = sum(o["size"] for o in inst["objects"])
    env = PlacementEnv(estimator=est, capacity={"slow": foot // 2}, model="linear")
    assert env.devices[env.fallback] == "mid"
    play(env, [0] * len(env.units))
    assert env.bytes_on("slow") <= foot // 2
    assert math.isfinite(env.runtime_s)
