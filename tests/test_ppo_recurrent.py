"""ppo_recurrent.py: the memory is stored, reset and replayed as the rollout used it; truncations
are bootstrapped from the state that saw the episode; evaluation carries the state through an
episode; the defaults learn CartPoleNoVel-v1; the NoVel envs hide the velocities; the script cut
at its banner trains, and a killed run resumes bit for bit. Its tests live here, not in conftest's
SCRIPTS: the tests parametrised over SCRIPTS check things (minibatches of steps, `agent.actor`)
that a recurrent script does differently."""

import inspect

import gymnasium as gym
import numpy as np
import pytest
import test_ppo_continuous
import torch
from conftest import TICK_LIMIT, kill_after_first_checkpoint, read_saved, run_folder, run_script
from test_resume import cli, outcome

import ppo_continuous
import ppo_recurrent as rec
import tooling

# A short run of the defaults (8 envs × 32 steps, 8 updates) on the default env.
SHORT = dict(env_id="CartPoleNoVel-v1", total_timesteps=2048, eval_episodes=0, checkpoint_every=0)


def run(log_dir, **overrides):
    return tooling.main(rec, tooling.run_args(rec)(**{**SHORT, "log_dir": log_dir, **overrides}))


def spy_agent(monkeypatch):
    """Put a recording Agent in the script. Returns (agents, rollout, replays): the agents built;
    per rollout step (obs, state in, episode starts, state out, value); per update call (obs,
    state in, episode starts)."""
    agents, rollout, replays = [], [], []

    class RecordingAgent(rec.Agent):
        def __init__(self, *a):
            super().__init__(*a)
            agents.append(self)

        def get_action_and_value(self, obs, state, episode_starts, action=None):
            out = super().get_action_and_value(obs, state, episode_starts, action)
            if action is None:  # acting in the rollout
                rollout.append((obs[0].clone(), state.clone(), episode_starts[0].clone(),
                                out[4].clone(), out[3][0].clone()))
            else:
                replays.append((obs.clone(), state.clone(), episode_starts.clone()))
            return out

    monkeypatch.setattr(rec, "Agent", RecordingAgent)
    return agents, rollout, replays


def spy_gae(monkeypatch, also=lambda: None):
    """Record what each update hands to compute_gae, and what `also()` returns then (before the
    update changes the networks)."""
    seen, real_gae = [], rec.compute_gae

    def spy(rewards, values, next_values, terminations, truncations, gamma, gae_lambda):
        seen.append(dict(values=values.clone(), next_values=next_values.clone(), also=also(),
                         terminations=terminations.clone(), truncations=truncations.clone()))
        return real_gae(rewards, values, next_values, terminations, truncations, gamma, gae_lambda)

    monkeypatch.setattr(rec, "compute_gae", spy)
    return seen


def spy_loss(monkeypatch):
    calls, real_loss = [], rec.ppo_loss

    def spy(new_logprob, old_logprob, advantages, new_value, old_value, *rest):
        calls.append((new_logprob.detach().clone(), old_logprob.clone(), new_value.detach().clone(),
                      old_value.clone()))
        return real_loss(new_logprob, old_logprob, advantages, new_value, old_value, *rest)

    monkeypatch.setattr(rec, "ppo_loss", spy)
    return calls


def columns(replay_obs, rollout_obs):
    """The env index of each column of a minibatch's (T, n, obs_dim) observations in the
    rollout's (T, N, obs_dim)."""
    return [next(i for i in range(rollout_obs.shape[1]) if torch.equal(replay_obs[:, j], rollout_obs[:, i]))
            for j in range(replay_obs.shape[1])]


def test_rollout_stores_the_start_state_of_each_segment_and_the_episode_start_flags(monkeypatch, log_dir):
    """Three segments of 2 envs × 16 steps. The state handed from step to step is the state the
    last step returned, across segments too; the update replays each env from the state the
    rollout carried at the end of the previous segment (zero at the first); the flags are 1 at
    the run's first step and where the previous step terminated or was truncated."""
    agents, rollout, replays = spy_agent(monkeypatch)
    seen = spy_gae(monkeypatch)
    T, N = 16, 2
    run(log_dir, num_envs=N, num_steps=T, total_timesteps=3 * N * T, update_epochs=1, num_minibatches=1)
    assert len(rollout) == 3 * T and len(replays) == 3
    for before, after in zip(rollout, rollout[1:], strict=False):
        assert torch.equal(after[1], before[3])  # state in = the previous step's state out
    dones = [torch.maximum(s["terminations"], s["truncations"]) for s in seen]  # (T, N) each
    assert sum(d.sum() for d in dones) > 0, "some episode ends in the run"
    for k, (obs, start_state, starts) in enumerate(replays):
        segment = rollout[k * T:(k + 1) * T]
        envs = columns(obs, torch.stack([step[0] for step in segment]))
        carried = agents[0].initial_state(N) if k == 0 else rollout[k * T - 1][3]
        assert carried.abs().sum() > 0 or k == 0
        torch.testing.assert_close(start_state, carried[envs], rtol=0, atol=0)
        expected = torch.cat([torch.ones(1, N) if k == 0 else dones[k - 1][-1:], dones[k][:-1]])
        assert torch.equal(starts, expected[:, envs])
        assert torch.equal(torch.stack([step[2] for step in segment]), expected)  # the rollout's flags


def test_the_state_is_reset_where_an_episode_starts_in_the_rollout_and_in_the_update(monkeypatch, log_dir):
    """Tick episodes (5 steps, the same observations each time): with the state reset at each
    episode start, the rollout's V at an episode's k-th step is the same in every episode and
    env; the update's replay (before any Adam step) gives back those values and log-probs."""
    _, rollout, _ = spy_agent(monkeypatch)
    calls = spy_loss(monkeypatch)
    run(log_dir, env_id="TickDiscrete-v0", num_envs=2, num_steps=12, total_timesteps=24, update_epochs=1,
        num_minibatches=1, norm_obs=False)
    values = torch.stack([step[4] for step in rollout])  # (T, N)
    assert values[1:TICK_LIMIT].sub(values[0]).abs().min() > 0  # V depends on the memory
    for t in range(TICK_LIMIT, 12):
        torch.testing.assert_close(values[t], values[t % TICK_LIMIT])
    torch.testing.assert_close(values[:, 0], values[:, 1])
    new_logprob, old_logprob, new_value, old_value = calls[0]
    # Within 1e-6, not bit for bit: the replay runs the LSTM over stretches, the rollout a step a
    # call (test_the_update_replays_whole_sequences_from_their_stored_start_states says why).
    torch.testing.assert_close(new_value, old_value, rtol=1e-6, atol=1e-6)
    torch.testing.assert_close(new_logprob, old_logprob, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("num_minibatches", [1, 2])
def test_the_update_replays_whole_sequences_from_their_stored_start_states(num_minibatches, monkeypatch, log_dir):
    """Before the first Adam step of each update, the replayed log-probs and values equal the
    rollout's within 1e-6: ratio 1 and KL 0 up to rounding, in every update (from the second on,
    the start state is not 0)."""
    calls = spy_loss(monkeypatch)
    run(log_dir, num_envs=4, num_steps=16, total_timesteps=4 * 4 * 16, update_epochs=1,
        num_minibatches=num_minibatches)
    firsts = calls[::num_minibatches]
    assert len(firsts) == 4
    for new_logprob, old_logprob, new_value, old_value in firsts:
        # Equal up to rounding, not bit for bit: the rollout runs the LSTM one step a call, the
        # replay a stretch a call, and oneDNN picks the LSTM's kernel by CPU (without AVX-512, log π
        # differs by up to 1.2e-7). A replay from a wrong state differs by 1e-3 or more.
        torch.testing.assert_close(new_logprob, old_logprob, rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(new_value, old_value, rtol=1e-6, atol=1e-6)


def lstm_by_hand(lstm, obs, h, c, starts):
    """nn.LSTM's equations written out, one step at a time: obs (T, B, D), h and c (B, H), starts
    (T, B). The state is set to 0 before a step where an episode starts. Returns the outputs
    (T, B, H) and the last h and c."""
    bias = lstm.bias_ih_l0 + lstm.bias_hh_l0
    outputs = []
    for t in range(obs.shape[0]):
        h, c = h * (1.0 - starts[t])[:, None], c * (1.0 - starts[t])[:, None]
        i, f, g, o = (obs[t] @ lstm.weight_ih_l0.T + h @ lstm.weight_hh_l0.T + bias).chunk(4, -1)
        c = f.sigmoid() * c + i.sigmoid() * g.tanh()
        h = o.sigmoid() * c.tanh()
        outputs.append(h)
    return torch.stack(outputs), h, c


def test_the_gradient_flows_back_through_time_from_the_given_state():
    """eq. (8.2): the gradient of a function of every output and of the last state, with respect
    to both LSTMs' weights and the observations, is the one of the LSTM written out by hand, run
    from the given start state with the same resets. A state detached inside the unroll cuts the
    gradient through time (differences of 0.5 or more, not 1e-6). An unroll from a zero state
    changes it as much."""
    torch.manual_seed(0)
    T, B, D, H = 12, 3, 4, 8
    agent = rec.Agent(D, gym.spaces.Discrete(2), hidden_size=H)
    obs, state = torch.randn(T, B, D, requires_grad=True), torch.randn(B, 4 * H)
    starts = torch.zeros(T, B)
    starts[0, 0] = starts[5, 1] = starts[9, 2] = 1.0  # an episode starts in each env, at 3 times
    weights = torch.randn(T, B, H), torch.randn(T, B, H), torch.randn(B, 4 * H)
    params = [obs, *agent.actor_lstm.parameters(), *agent.critic_lstm.parameters()]

    def gradients(actor_out, critic_out, last_state):
        outputs = actor_out, critic_out, last_state
        objective = sum((out * w).sum() for out, w in zip(outputs, weights, strict=True))
        return torch.autograd.grad(objective, params)

    h_actor, c_actor, h_critic, c_critic = state.chunk(4, -1)
    actor_out, h_actor, c_actor = lstm_by_hand(agent.actor_lstm, obs, h_actor, c_actor, starts)
    critic_out, h_critic, c_critic = lstm_by_hand(agent.critic_lstm, obs, h_critic, c_critic, starts)
    expected = gradients(actor_out, critic_out, torch.cat([h_actor, c_actor, h_critic, c_critic], -1))
    got = gradients(*agent.unroll(obs, state, starts))
    for g, e in zip(got, expected, strict=True):
        # Close, not equal: oneDNN's LSTM sums in another order and computes its own tanh and
        # sigmoid, in float32. Seen: 1.1e-6 at most, under every cap of tests/other_cpus.py.
        torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5)


def test_a_truncation_is_bootstrapped_from_the_state_that_saw_the_episode(monkeypatch, log_dir):
    """Tick episodes are cut at step 5. The V(final obs) handed to GAE is the value that a replay
    of the episode from its start, then the final observation, gives: not V from a zero state."""
    agents, _, _ = spy_agent(monkeypatch)
    episode = torch.tensor([[float(t), 1.0] for t in range(TICK_LIMIT + 1)])[:, None]  # (6, 1, 2)
    starts = torch.zeros(TICK_LIMIT + 1, 1)
    starts[0] = 1.0

    def replayed():  # V(final obs): after the episode's steps, then from a zero state
        with torch.no_grad():
            agent, zero = agents[0], agents[0].initial_state(1)
            return (agent.get_value(episode, zero, starts)[0][-1, 0],
                    agent.get_value(episode[-1:], zero, torch.ones(1, 1))[0][0, 0])

    seen = spy_gae(monkeypatch, replayed)
    run(log_dir, env_id="TickDiscrete-v0", num_envs=2, num_steps=12, total_timesteps=24, update_epochs=1,
        num_minibatches=1, norm_obs=False)
    gae = seen[0]
    expected, from_zero = gae["also"]
    assert gae["truncations"].sum() == 4 and gae["terminations"].sum() == 0
    assert abs(expected - from_zero) > 1e-4
    for t, n in gae["truncations"].nonzero().tolist():
        torch.testing.assert_close(gae["next_values"][t, n], expected)


def test_evaluation_carries_the_state_through_an_episode_and_resets_it_between(monkeypatch, tmp_path):
    env = gym.make("TickDiscrete-v0")
    agent = rec.Agent(2, env.action_space)
    calls, real = [], rec.Agent.greedy_action

    def spy(self, obs, state=None):
        action, new_state = real(self, obs, state)
        calls.append((state, new_state))
        return action, new_state

    monkeypatch.setattr(rec.Agent, "greedy_action", spy)
    returns = tooling.evaluate(rec, agent, tooling.run_args(rec)(env_id="TickDiscrete-v0", eval_episodes=3), str(tmp_path))
    assert returns == [TICK_LIMIT] * 3 and len(calls) == 3 * TICK_LIMIT
    for i, (state, _) in enumerate(calls):
        if i % TICK_LIMIT == 0:
            assert state is None  # an episode's start
        else:
            assert state is calls[i - 1][1]  # the state the last step returned


def test_the_defaults_learn_cartpole_without_velocities(log_dir):
    """The defaults, on 40k of their 100k steps: a return far above feed-forward PPO's (about 42
    at 100k for ppo_discrete.py). Seed 1 reaches 357; with the state reset at every step, 44."""
    state = run(log_dir, total_timesteps=40_960)
    recent = [r for _, r in state["episodic_returns"][-20:]]
    assert np.mean(recent) > 150, np.mean(recent)


def test_box_actions_run_and_evaluate(log_dir):
    state = run(log_dir, env_id="PendulumNoVel-v1", num_envs=2, num_steps=32, total_timesteps=256,
                eval_episodes=1, save_model=True)
    assert state["agent"].continuous and len(state["eval_returns"]) == 1
    assert np.isfinite(state["eval_returns"]).all()
    loaded = tooling.load_agent(rec, f"{state['run_dir']}/model.pt")
    action, _ = loaded.greedy_action(np.zeros(3, np.float32))
    assert isinstance(action, np.ndarray) and action.shape == (1,)


# The velocities in each base env's observation, from Gymnasium's documentation of each env.
VELOCITIES = {"CartPole-v1": [1, 3], "Pendulum-v1": [2], "MountainCar-v0": [1], "MountainCarContinuous-v0": [1],
              "LunarLander-v3": [2, 3, 5], "LunarLanderContinuous-v3": [2, 3, 5]}


@pytest.mark.parametrize("base", list(VELOCITIES))
def test_novel_envs_hide_the_velocities_and_nothing_else(base):
    name, version = base.rsplit("-", 1)
    novel, full = gym.make(f"{name}NoVel-{version}"), gym.make(base)
    assert novel.observation_space == full.observation_space
    assert novel.spec.max_episode_steps == full.spec.max_episode_steps
    hidden = VELOCITIES[base]
    shown = [i for i in range(full.observation_space.shape[0]) if i not in hidden]
    (obs, _), (full_obs, _) = novel.reset(seed=3), full.reset(seed=3)
    full.action_space.seed(3)
    for _ in range(20):
        assert (obs[hidden] == 0).all() and np.array_equal(obs[shown], full_obs[shown])
        assert np.abs(full_obs[hidden]).sum() > 0 or _ == 0
        action = full.action_space.sample()
        obs, _, terminated, truncated, _ = novel.step(action)
        full_obs, *_ = full.step(action)
        if terminated or truncated:
            break


def test_a_killed_run_resumes_to_the_run_never_stopped(tmp_path):
    flags = dict(SHORT, eval_episodes=2, checkpoint_every=1, save_model=True)
    tooling.main(rec, tooling.run_args(rec)(**flags, log_dir=str(tmp_path / "whole")))
    kill_after_first_checkpoint("ppo_recurrent.py", cli(flags), tmp_path / "killed")
    folder = run_folder(tmp_path / "killed")
    saved = read_saved(f"{folder}/checkpoint.pt", weights_only=False)["state"]
    assert saved["global_step"] < SHORT["total_timesteps"] and saved["next_state"].abs().sum() > 0
    resumed = run_script("ppo_recurrent.py", f"--resume={folder}/checkpoint.pt")
    assert resumed.returncode == 0, resumed.stderr
    assert "note:" not in resumed.stderr  # classic control pickles whole: the resume is exact
    assert outcome(folder) == outcome(run_folder(tmp_path / "whole"))


def test_num_minibatches_must_divide_num_envs():
    out = run_script("ppo_recurrent.py", "--num-envs=8", "--num-minibatches=3", "--total-timesteps=256",
                     "--eval-episodes=0")
    assert out.returncode == 1 and "--num-minibatches 3 does not divide --num-envs 8" in out.stderr


def test_rewards_are_scaled_by_default_and_raw_with_no_norm_reward(monkeypatch, log_dir):
    """RL Zoo's VecNormalize scales the rewards, and so does the script, with ppo_continuous.py's
    RewardScaler (the same text, tested there). CartPoleNoVel-v1 pays 1 at every step. GAE gets
    ones with --no-norm-reward, and 1 divided by the std of the discounted return by default.
    The rewards are scaled after the step, so the first rollout acts the same either way."""
    assert inspect.getsource(rec.RewardScaler) == inspect.getsource(ppo_continuous.RewardScaler)
    test_ppo_continuous.test_reward_scale_is_std_of_discounted_return_reset_at_episode_end(module=rec)
    seen, real_gae = [], rec.compute_gae
    monkeypatch.setattr(rec, "compute_gae", lambda r, *a: seen.append(r.clone()) or real_gae(r, *a))
    acted_on = {}
    for norm_reward in (True, False):
        _, rollout, _ = spy_agent(monkeypatch)
        run(log_dir, num_envs=2, num_steps=16, total_timesteps=32, norm_reward=norm_reward)
        acted_on[norm_reward] = torch.stack([step[0] for step in rollout])
    scaled, raw = seen
    assert torch.equal(raw, torch.ones(16, 2))
    assert scaled.min() > 0 and not torch.allclose(scaled, torch.ones(16, 2))
    assert scaled[-1, 0] < 1  # R has grown to several steps' rewards: its std is above 1
    assert torch.equal(acted_on[True], acted_on[False])  # the same observations acted on
