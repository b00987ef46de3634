"""Truncation inside real training runs of the scripts with a critic and Discrete actions
(ppo_continuous.py has its own test, with normalised observations): a time-limit end is
bootstrapped with the value of the real final observation, which the vector env reports in
infos["final_obs"] while it already returns the next episode's first observation."""

import glob

import pytest
import torch
from conftest import TICK_LIMIT, VECTOR_SCRIPTS, _module, short_args
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import ppo_continuous
import ppo_discrete
import tooling
import trpo
import vpg


@pytest.mark.parametrize("module", [ppo_discrete, vpg, trpo])
def test_rollout_bootstraps_truncation_with_final_observation(module, monkeypatch, log_dir):
    """Inside a real training run: at a time-limit truncation, the V(s_{t+1}) handed to GAE is the
    critic's value of the real final observation (t = L), not of the reset observation; elsewhere
    it is the value of the next stored observation; nothing ever counts as terminated."""
    agents, seen, real_gae = [], [], module.compute_gae

    class RecordingAgent(module.Agent):
        def __init__(self, *a):
            super().__init__(*a)
            agents.append(self)

    def spy_gae(rewards, values, next_values, terminations, truncations, gamma, gae_lambda):
        with torch.no_grad():
            final_value = agents[0].get_value(torch.tensor([float(TICK_LIMIT), 1.0])).item()
            reset_value = agents[0].get_value(torch.tensor([0.0, 1.0])).item()
        seen.append((values.clone(), next_values.clone(), terminations.clone(), truncations.clone(), final_value, reset_value))
        return real_gae(rewards, values, next_values, terminations, truncations, gamma, gae_lambda)

    monkeypatch.setattr(module, "Agent", RecordingAgent)
    monkeypatch.setattr(module, "compute_gae", spy_gae)
    tooling.main(module, short_args(module, log_dir, env_id="TickDiscrete-v0", num_envs=2, num_steps=12, total_timesteps=24,
                            **({"num_minibatches": 2} if module is ppo_discrete else {})))
    values, next_values, terminations, truncations, final_value, reset_value = seen[0]
    assert terminations.sum() == 0
    assert truncations[TICK_LIMIT - 1].tolist() == [1.0, 1.0] and truncations.sum() == 4  # steps 5 and 10
    assert final_value != pytest.approx(reset_value)
    for t in range(11):
        for n in range(2):
            if truncations[t, n]:
                assert next_values[t, n].item() == pytest.approx(final_value, abs=1e-6)
            else:
                assert next_values[t, n].item() == pytest.approx(values[t + 1, n].item(), abs=1e-6)


@pytest.mark.parametrize("module", [ppo_discrete, ppo_continuous])
def test_no_bootstrap_truncation_counts_a_truncation_as_a_termination(module, monkeypatch, log_dir):
    """--no-bootstrap-truncation (an ablation, CleanRL's behaviour): GAE is told that every
    truncated step terminated, so a cut episode's advantage there is r − V(s), with no V of the
    final observation; and nothing else changes: from the same seed, the rollout and every other
    input of GAE are the same as with the default."""
    seen, real_gae = [], module.compute_gae

    def spy_gae(*inputs):
        seen.append([x.clone() for x in inputs[:5]])
        out = real_gae(*inputs)
        seen[-1].append(out[0].clone())
        return out

    monkeypatch.setattr(module, "compute_gae", spy_gae)
    env_id = "TickContinuous-v0" if module is ppo_continuous else "TickDiscrete-v0"
    for bootstrap in (True, False):
        tooling.main(module, short_args(module, log_dir, env_id=env_id, num_envs=2, num_steps=12, num_minibatches=2,
                                total_timesteps=24, bootstrap_truncation=bootstrap))
    (rewards, values, next_values, terminations, truncations, advantages_on), off = seen
    assert terminations.sum() == 0 and truncations.sum() == 4  # the default: truncated, never terminated
    for on_input, off_input in zip([rewards, values, next_values, truncations], [off[0], off[1], off[2], off[4]], strict=True):
        assert torch.equal(on_input, off_input)
    assert torch.equal(off[3], truncations)  # every truncation handed over as a termination
    cut = truncations.bool()
    torch.testing.assert_close(off[5][cut], rewards[cut] - values[cut])  # A_t = r_t − V(s_t): no future
    assert not torch.allclose(advantages_on[cut], off[5][cut])  # the default bootstraps: it differs


@pytest.mark.parametrize("module", [ppo_discrete, ppo_continuous])
def test_no_bootstrap_truncation_keeps_a_termination_a_termination(module, monkeypatch, log_dir):
    """--no-bootstrap-truncation adds the truncations to the terminations; it does not replace
    them: on TickEnds, whose episodes terminate, GAE still gets every termination."""
    seen, real_gae = [], module.compute_gae
    monkeypatch.setattr(module, "compute_gae", lambda *a: (seen.append(a[3].clone()), real_gae(*a))[1])
    env_id = "TickEndsContinuous-v0" if module is ppo_continuous else "TickEndsDiscrete-v0"
    tooling.main(module, short_args(module, log_dir, env_id=env_id, num_envs=2, num_steps=12, num_minibatches=2,
                            total_timesteps=24, bootstrap_truncation=False))
    assert seen[0].sum() == 4  # steps 5 and 10 of both envs


@pytest.mark.parametrize("env_id", ["TickDiscrete-v0", "TickContinuous-v0", "TickEndsDiscrete-v0", "TickEndsContinuous-v0"])
@pytest.mark.parametrize("name", VECTOR_SCRIPTS)  # TickEnv's observations are vectors
def test_every_episode_is_logged_with_its_true_length_and_return(name, env_id, log_dir):
    """Every episode lasts TICK_LIMIT steps at reward 1, cut by a time limit (Tick) or
    terminated (TickEnds), and every one is logged so, the first of each env and all after it.
    (Gymnasium before 1.4 logged each env's later episodes one step short, and reinforce.py, which
    took its episode boundaries from those counts, failed.)"""
    module = _module(name)
    if "Continuous" in env_id and module.__name__ == "ppo_discrete":
        pytest.skip("ppo_discrete.py is for Discrete actions")
    if "Discrete" in env_id and module.__name__ == "ppo_continuous":
        pytest.skip("ppo_continuous.py is for Box actions")
    sizes = {"reinforce": dict(batch_size=12)}.get(name, dict(num_steps=12))
    sizes |= dict(num_minibatches=2) if name.startswith("ppo") else {}
    result = tooling.main(module, short_args(module, log_dir, env_id=env_id, num_envs=2, total_timesteps=48, **sizes))
    (run_dir,) = glob.glob(f"{log_dir}/*")
    events = EventAccumulator(run_dir, size_guidance={"scalars": 0})
    events.Reload()
    lengths = [e.value for e in events.Scalars("charts/episodic_length")]
    returns = [e.value for e in events.Scalars("charts/episodic_return")]
    assert len(lengths) >= 8 and set(lengths) == {TICK_LIMIT} and set(returns) == {TICK_LIMIT}
    assert [r for _, r in result["episodic_returns"]] == returns
