"""What the rollout stores is what the update needs: the observations acted on, with the critic's
V and, for PPO, the policy's log π of the action taken, each under the networks of that rollout.
The scripts keep these in tensors or NumPy arrays for speed; a value put in the wrong step, the
wrong buffer or lost in a conversion shows here."""

import pytest
import torch
from conftest import nearly_equal_like, short_args

import tooling


def tick_run(module, log_dir, **overrides):
    """One 12-step iteration of 2 Tick envs (time limit 5), the env of the script's action kind."""
    env_id = {"ppo_continuous": "TickContinuous-v0", "ppo_atari": "TickImage-v0"}.get(module.__name__,
                                                                                  "TickDiscrete-v0")
    extra = {} if module.__name__ in ("vpg", "trpo") else {"num_minibatches": 2}
    tooling.main(module, short_args(module, log_dir, env_id=env_id, num_envs=2, num_steps=12, total_timesteps=24,
                            **extra, **overrides))


def test_values_handed_to_gae_are_the_critics_values_of_the_observations_acted_on(gae_script, monkeypatch,
                                                                                     log_dir):
    module, acted_on, agents, seen = gae_script, [], [], []
    real_gae = module.compute_gae

    class RecordingAgent(module.Agent):
        def __init__(self, *a):
            super().__init__(*a)
            agents.append(self)

    base = module.Agent
    act = "get_action_and_value" if hasattr(base, "get_action_and_value") else "get_action"

    def recording(self, obs, action=None):
        if action is None:  # acting in the rollout
            acted_on.append(obs.clone())
        return getattr(base, act)(self, obs, action)

    setattr(RecordingAgent, act, recording)

    def spy_gae(rewards, values, *rest):
        if not seen:  # the first rollout, before its update changed the critic
            with torch.no_grad():
                acted = torch.stack(acted_on[:12])  # (T, N, ...): one value each
                seen.append((values.clone(), agents[0].get_value(acted.flatten(0, 1)).reshape(12, -1)))
        return real_gae(rewards, values, *rest)

    monkeypatch.setattr(module, "Agent", RecordingAgent)
    monkeypatch.setattr(module, "compute_gae", spy_gae)
    tick_run(module, log_dir)
    values, expected = seen[0]  # (T, N) each
    assert values.shape == (12, 2) and expected.abs().min() > 0
    torch.testing.assert_close(values, expected)


def test_first_minibatch_reproduces_the_stored_log_probs_and_values(ppo_script, monkeypatch, log_dir):
    """Before the first Adam step π_θ is still π_θ_old: the update's re-evaluation of the stored
    observations and actions gives back the stored log π (ratio 1) and V."""
    module, calls = ppo_script, []
    real_loss = module.ppo_loss

    def spy_loss(new_logprob, old_logprob, advantages, new_value, old_value, *rest):
        calls.append((new_logprob.detach().clone(), old_logprob.clone(), new_value.detach().clone(),
                      old_value.clone()))
        return real_loss(new_logprob, old_logprob, advantages, new_value, old_value, *rest)

    monkeypatch.setattr(module, "ppo_loss", spy_loss)
    tick_run(module, log_dir)
    new_logprob, old_logprob, new_value, old_value = calls[0]  # (minibatch,) each
    assert old_value.abs().min() > 0 and old_logprob.abs().min() > 0
    torch.testing.assert_close(old_logprob, new_logprob)
    torch.testing.assert_close(old_value, new_value)


def test_vpg_first_critic_step_reproduces_the_stored_values(monkeypatch, log_dir):
    """vpg's policy step leaves the critic as it was in the rollout, so its first critic step
    re-evaluates the stored observations to the stored values."""
    import vpg

    gae_values, critic_values = [], []
    real_gae, real_value_loss = vpg.compute_gae, vpg.value_loss

    def spy_gae(rewards, values, *rest):
        gae_values.append(values.clone())
        return real_gae(rewards, values, *rest)

    def spy_value_loss(value, returns):
        critic_values.append(value.detach().clone())
        return real_value_loss(value, returns)

    monkeypatch.setattr(vpg, "compute_gae", spy_gae)
    monkeypatch.setattr(vpg, "value_loss", spy_value_loss)
    tick_run(vpg, log_dir)
    assert gae_values[0].abs().min() > 0
    torch.testing.assert_close(critic_values[0], gae_values[0].reshape(-1))  # (T·N,)


def test_ppo_minibatch_advantages_are_normalised_to_mean_0_and_std_1(ppo_script, monkeypatch, log_dir):
    """--norm-adv (core detail 7): the advantages each minibatch hands to the loss have mean 0 and
    std 1 within that minibatch (the rollout's are far from both: on Tick every reward is 1);
    --no-norm-adv hands over the rollout's own values."""
    module, gae_out, given = ppo_script, [], []
    real_gae, real_loss = module.compute_gae, module.ppo_loss
    monkeypatch.setattr(module, "compute_gae", lambda *a: (gae_out.append(real_gae(*a)), gae_out[-1])[1])
    monkeypatch.setattr(module, "ppo_loss",
                        lambda new_lp, old_lp, adv, *rest: (given.append(adv.clone()), real_loss(new_lp, old_lp, adv, *rest))[1])
    for norm_adv in (True, False):
        given.clear()
        tick_run(module, log_dir, norm_adv=norm_adv, update_epochs=1)
        rollout = gae_out[-1][0].reshape(-1)  # the batch's advantages, (T·N,)
        assert len(given) == 2 and rollout.mean() > 1
        for mb in given:
            if norm_adv:
                assert abs(mb.mean().item()) < 1e-5 and mb.std().item() == pytest.approx(1.0, abs=1e-4)
            else:
                assert torch.isin(mb, rollout).all()


def test_ppo_advantages_and_targets_are_gae_with_the_runs_gamma_and_lambda(ppo_script, monkeypatch, log_dir):
    """PPO's one GAE call gets the run's γ and λ (the critic's targets are its λ-returns)."""
    seen, real_gae = [], ppo_script.compute_gae
    monkeypatch.setattr(ppo_script, "compute_gae", lambda *a: (seen.append(a[5:]), real_gae(*a))[1])
    tick_run(ppo_script, log_dir, gamma=0.9, gae_lambda=0.8)
    assert seen == [(0.9, 0.8)]


def test_ppo_minibatch_of_nearly_equal_advantages_is_normalised_without_blowing_up(ppo_script, monkeypatch,
                                                                                   log_dir):
    """The 1e-8 in (Â − mean) / (std + 1e-8) is added: advantages that spread by less than 1e-8
    come out bounded and in their order, where a subtracted 1e-8 would flip and inflate them."""
    given, real_gae, real_loss = [], ppo_script.compute_gae, ppo_script.ppo_loss

    def tiny_gae(*a):  # nearly equal advantages, the real returns
        advantages, returns = real_gae(*a)
        return nearly_equal_like(advantages), returns

    monkeypatch.setattr(ppo_script, "compute_gae", tiny_gae)
    monkeypatch.setattr(ppo_script, "ppo_loss",
                        lambda new_lp, old_lp, adv, *rest: (given.append(adv.clone()), real_loss(new_lp, old_lp, adv, *rest))[1])
    monkeypatch.setattr(torch, "randperm", lambda n, **kw: torch.arange(n))  # minibatches in time order
    tick_run(ppo_script, log_dir, update_epochs=1)
    for mb in given:
        assert torch.isfinite(mb).all() and mb.abs().max() < 1 and mb[-1] > mb[0], mb
