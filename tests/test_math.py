"""The math shared between scripts (GAE in PPO and VPG, the PPO loss in both PPO scripts), checked
in each script against references worked out independently: a naive sum, Monte-Carlo returns, and values computed by hand."""

import math

import numpy as np
import pytest
import torch
from conftest import naive_gae, random_rollout

# --------------------------------------------------------------------------------------------
# GAE
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("gamma,gae_lambda", [(0.99, 0.95), (0.9, 0.5), (1.0, 1.0)])
def test_gae_matches_naive_sum(gae_script, gamma, gae_lambda):
    data = random_rollout()
    advantages, returns = gae_script.compute_gae(**data, gamma=gamma, gae_lambda=gae_lambda)
    expected = naive_gae(**{k: v.numpy() for k, v in data.items()}, gamma=gamma, gae_lambda=gae_lambda)
    np.testing.assert_allclose(advantages.numpy(), expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(returns.numpy(), expected + data["values"].numpy(), rtol=1e-5, atol=1e-5)


def test_gae_lambda_one_is_monte_carlo_return_minus_value(gae_script):
    """λ = 1: A_t = Σ_k γ^{k-t} r_k (+ γ^{..} V(bootstrap)) − V(s_t), the discounted return to
    the episode's end, bootstrapped only where the episode was cut (the TD errors telescope when
    V(s_{t+1}) is the same number in δ_t and δ_{t+1}, as in a real rollout)."""
    data = random_rollout(T=30, N=2, seed=1, consistent=True)
    gamma = 0.97
    advantages, _ = gae_script.compute_gae(**data, gamma=gamma, gae_lambda=1.0)
    r, v, nv = data["rewards"].numpy(), data["values"].numpy(), data["next_values"].numpy()
    term, trunc = data["terminations"].numpy(), data["truncations"].numpy()
    T, N = r.shape
    for n in range(N):
        G = 0.0  # return from the end of the rollout backwards
        for t in reversed(range(T)):
            if term[t, n]:
                G = r[t, n]
            elif trunc[t, n] or t == T - 1:
                G = r[t, n] + gamma * nv[t, n]
            else:
                G = r[t, n] + gamma * G
            assert advantages[t, n].item() == pytest.approx(G - v[t, n], abs=1e-4)


def test_gae_lambda_zero_is_one_step_td_error(gae_script):
    data = random_rollout(seed=2)
    gamma = 0.9
    advantages, _ = gae_script.compute_gae(**data, gamma=gamma, gae_lambda=0.0)
    td = data["rewards"] + gamma * (1 - data["terminations"]) * data["next_values"] - data["values"]
    torch.testing.assert_close(advantages, td)


def test_gae_truncation_bootstraps_and_termination_does_not(gae_script):
    one = torch.ones(1, 1)
    zero = torch.zeros(1, 1)
    kwargs = dict(rewards=one, values=zero, next_values=10 * one, gamma=0.5, gae_lambda=0.9)
    terminated, _ = gae_script.compute_gae(terminations=one, truncations=zero, **kwargs)
    truncated, _ = gae_script.compute_gae(terminations=zero, truncations=one, **kwargs)
    assert terminated.item() == pytest.approx(1.0)  # r, no future
    assert truncated.item() == pytest.approx(1.0 + 0.5 * 10)  # r + γ V(final obs)


def test_gae_recursion_stops_at_episode_end(gae_script):
    """Step 0 ends an episode (truncated); step 1 belongs to the next one and must not leak into A_0."""
    rewards = torch.tensor([[0.0], [100.0]])
    values = torch.zeros(2, 1)
    next_values = torch.tensor([[2.0], [0.0]])
    for terminations, truncations, expected in [([[0.0], [0.0]], [[1.0], [0.0]], 1.0), ([[1.0], [0.0]], [[0.0], [0.0]], 0.0)]:
        adv, _ = gae_script.compute_gae(rewards, values, next_values, torch.tensor(terminations),
                                        torch.tensor(truncations), 0.5, 1.0)
        assert adv[0, 0].item() == pytest.approx(expected)


# --------------------------------------------------------------------------------------------
# The PPO loss, on inputs worked out by hand
# --------------------------------------------------------------------------------------------


def loss_terms(module, new_logprob, advantages, clip_coef=0.2, **overrides):
    """ppo_loss with the value and entropy terms switched off, so only the surrogate remains."""
    new_logprob = torch.tensor(new_logprob, requires_grad=True)
    n = len(advantages)
    kwargs = dict(new_logprob=new_logprob, old_logprob=torch.zeros(n), advantages=torch.tensor(advantages),
                  new_value=torch.zeros(n), old_value=torch.zeros(n), returns=torch.zeros(n), entropy=torch.zeros(n),
                  clip_coef=clip_coef, clip_vloss=True, ent_coef=0.0, vf_coef=0.0)
    kwargs.update(overrides)
    loss, stats = module.ppo_loss(**kwargs)
    loss.backward()
    return loss.item(), new_logprob.grad, stats


@pytest.mark.parametrize(
    "ratio,advantage,expected_loss,expected_grad",
    [
        # (ratio r, Â) -> −min(r Â, clip(r) Â) and its derivative w.r.t. log π = −Â r where not clipped
        (1.5, 2.0, -2.4, 0.0),  # r > 1+ε with Â > 0: clipped at 1.2·2, no gradient
        (1.5, -2.0, 3.0, 3.0),  # r > 1+ε with Â < 0: the unclipped, worse term is kept
        (0.5, 2.0, -1.0, -1.0),  # r < 1−ε with Â > 0: unclipped term kept
        (0.5, -2.0, 1.6, 0.0),  # r < 1−ε with Â < 0: clipped at 0.8·(−2), no gradient
        (1.1, 2.0, -2.2, -2.2),  # inside the trust region: plain r Â
    ],
)
def test_clipped_surrogate_by_hand(ppo_script, ratio, advantage, expected_loss, expected_grad):
    loss, grad, _ = loss_terms(ppo_script, [math.log(ratio)], [advantage])
    assert loss == pytest.approx(expected_loss, rel=1e-5)
    assert grad.item() == pytest.approx(expected_grad, abs=1e-6)


def test_surrogate_is_mean_over_samples_and_at_ratio_one_its_gradient_is_minus_advantage_over_n(ppo_script):
    loss, grad, stats = loss_terms(ppo_script, [0.0, 0.0, 0.0], [1.0, -2.0, 4.0])
    assert loss == pytest.approx(-1.0)
    torch.testing.assert_close(grad, torch.tensor([-1.0, 2.0, -4.0]) / 3)
    assert stats["clipfrac"].item() == 0.0 and stats["approx_kl"].item() == 0.0


def value_loss(module, new, old, returns, clip_vloss):
    n = torch.zeros(1)
    _, stats = module.ppo_loss(n, n, n, torch.tensor([new]), torch.tensor([old]), torch.tensor([returns]), n,
                               clip_coef=0.2, clip_vloss=clip_vloss, ent_coef=0.0, vf_coef=1.0)
    return stats["value_loss"].item()


def test_value_loss_by_hand(ppo_script):
    # V_old = 0, V = 1, R = 2: unclipped (1−2)² = 1; clipped V = 0.2, (0.2−2)² = 3.24; ½·max = 1.62
    assert value_loss(ppo_script, 1.0, 0.0, 2.0, clip_vloss=True) == pytest.approx(1.62)
    # V_old = 0, V = 1, R = 0.5: unclipped 0.25, clipped (0.2−0.5)² = 0.09; ½·max = 0.125
    assert value_loss(ppo_script, 1.0, 0.0, 0.5, clip_vloss=True) == pytest.approx(0.125)
    assert value_loss(ppo_script, 1.0, 0.0, 2.0, clip_vloss=False) == pytest.approx(0.5)
    # V_old = −1, V = 0.5, R = 2: V moved by 1.5, clipped to 0.2, so V_clip = −0.8; ½·max(2.25, 7.84)
    assert value_loss(ppo_script, 0.5, -1.0, 2.0, clip_vloss=True) == pytest.approx(3.92)
    # a batch of two is averaged: ½·max(1, 3.24) and ½·max(0.25, 0.09), mean (1.62 + 0.125) / 2
    n = torch.zeros(2)
    _, stats = ppo_script.ppo_loss(n, n, n, torch.tensor([1.0, 1.0]), n, torch.tensor([2.0, 0.5]), n,
                                   clip_coef=0.2, clip_vloss=True, ent_coef=0.0, vf_coef=1.0)
    assert stats["value_loss"].item() == pytest.approx((1.62 + 0.125) / 2)


def test_total_loss_combines_terms_with_their_signs(ppo_script):
    """L = L_pg + c₁ L_V − c₂ H: the entropy is a bonus (lowers the loss), the value error a cost."""
    logp, adv = torch.tensor([0.0, 0.0]), torch.tensor([1.0, 3.0])
    entropy, new_v, ret = torch.tensor([0.5, 0.7]), torch.tensor([1.0, 1.0]), torch.tensor([3.0, 1.0])
    loss, stats = ppo_script.ppo_loss(logp, logp, adv, new_v, new_v, ret, entropy, 0.2, False, ent_coef=0.1, vf_coef=0.5)
    # L_pg = −mean(Â) = −2; L_V = ½·mean((1−3)², 0) = 1; H = 0.6
    assert stats["policy_loss"].item() == pytest.approx(-2.0)
    assert stats["value_loss"].item() == pytest.approx(1.0)
    assert stats["entropy"].item() == pytest.approx(0.6)
    assert loss.item() == pytest.approx(-2.0 + 0.5 * 1.0 - 0.1 * 0.6)


def test_kl_estimators_and_clipfrac_by_hand(ppo_script):
    log_r = [math.log(1.5), math.log(0.9)]
    _, _, stats = loss_terms(ppo_script, log_r, [1.0, 1.0])
    # every stat is detached, the losses too: a logged loss must not keep its graph alive
    carry = [key for key, value in stats.items() if value.requires_grad]
    assert not carry, f"the stats {carry} carry a gradient: detach them"
    k1 = -(log_r[0] + log_r[1]) / 2
    k3 = ((1.5 - 1 - log_r[0]) + (0.9 - 1 - log_r[1])) / 2
    assert stats["old_approx_kl"].item() == pytest.approx(k1, rel=1e-5)
    assert stats["approx_kl"].item() == pytest.approx(k3, rel=1e-5)
    assert stats["clipfrac"].item() == pytest.approx(0.5)  # only r = 1.5 lies outside [0.8, 1.2]
    # both sides of [1 − ε, 1 + ε] count: r = 0.5 lies below it, r = 1 inside
    _, _, stats = loss_terms(ppo_script, [math.log(0.5), 0.0], [1.0, 1.0])
    assert stats["clipfrac"].item() == pytest.approx(0.5)
    # a sample on the edge of [1 − ε, 1 + ε] is not clipped (clamp leaves it as it is): r = 1, ε = 0
    _, _, stats = loss_terms(ppo_script, [0.0, 0.0], [1.0, 1.0], clip_coef=0.0)
    assert stats["clipfrac"].item() == 0.0
