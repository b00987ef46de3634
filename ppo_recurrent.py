"""Proximal policy optimisation (PPO-clip) with memory: an LSTM policy and critic, in one file.

    Recurrent PPO, one iteration of `train`:
    1. Keep each env's recurrent state (N, 4H) from the last iteration (`next_state`).
    2. Store it as the segment's start state (`start_state`). Step the N envs T times with π_θ
       (`--- rollout ---`), resetting the state where an episode starts (`Agent.unroll`).
    3. At a truncation, store V(final obs) from the state that saw the episode (`final_values`).
    4. Bootstrap the segment's end with V(s_T) and compute GAE-λ (`compute_gae`).
    5. Split the N envs into minibatches of whole sequences of T steps (`--- update ---`). Replay
       each from its stored start states, with the same resets (`Agent.unroll`).
    6. Take an Adam step on the clipped PPO loss (`ppo_loss`, `surrogate`).
    7. Repeat steps 5-6 for K epochs, or until an epoch's mean KL exceeds `--target-kl`.
    8. Log each loss as its mean over all the update's minibatches (`--- log ---`).

    python ppo_recurrent.py                                 # CartPoleNoVel-v1, 100k steps
    python ppo_recurrent.py --env-id PendulumNoVel-v1       # Box actions
    python ppo_recurrent.py --save-model                    # (tooling) writes runs/<run>/model.pt
    python ppo_recurrent.py --eval-checkpoint runs/<run>/model.pt --capture-video  # (tooling)
    tensorboard --logdir runs

What changes from ppo_discrete.py: memory, three pieces of ppo_continuous.py, RL Zoo's network
and 11 changed defaults."""

import functools
import itertools
import math
import os
import random
import time
from dataclasses import asdict, dataclass

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import tyro
from torch.utils.tensorboard import SummaryWriter

ALGORITHM, RELEASE = "ppo_recurrent", "0.5.0"  # this script, and pgref's release
SPACES = "vector", "Discrete or Box"  # the observations and actions it takes


# "core detail N", "continuous detail N": item N of Huang et al. 2022's lists of PPO's details.
@dataclass
class Args:
    # --- the algorithm ---
    env_id: str = "CartPoleNoVel-v1"
    """Gymnasium env with Discrete or Box actions; module:EnvId for an env of your own"""
    hidden_size: int = 64
    """H, units of each LSTM and of the hidden layer of each head"""
    total_timesteps: int = 99_840
    """environment steps to train for, summed over all envs (whole batches: 390 of 256)"""
    learning_rate: float = 1e-3
    """Adam step size α of actor and critic"""
    anneal_lr: bool = True
    """decay the step size linearly from α to α/I in the last of I iterations (core detail 4)"""
    update_epochs: int = 20
    """K, passes over each batch"""
    num_minibatches: int = 1
    """M, minibatches per epoch, each of N/M whole env sequences; must divide N"""
    clip_coef: float = 0.2
    """ε of the clipped surrogate objective"""
    clip_vloss: bool = False
    """clip the value update to ±ε around the rollout's value prediction, as in PPO's own code"""
    ent_coef: float = 0.0
    """c₂ ≥ 0, weight of the entropy bonus"""
    vf_coef: float = 0.5
    """c₁ ≥ 0, weight of the value loss"""
    max_grad_norm: float = 0.5
    """the global L2 norm of the gradient is clipped to this value"""
    target_kl: float | None = None
    """stop an update's epochs once an epoch's mean approx-KL exceeds it; typical 0.01 to 0.05"""
    norm_adv: bool = True
    """normalise advantages to mean 0, std 1 within each minibatch"""
    num_envs: int = 8
    """N, environments stepped in parallel (one synchronous vector env)"""
    num_steps: int = 32
    """T, steps per environment in each batch; batch size = N·T"""
    gamma: float = 0.98
    """discount factor γ in [0, 1]"""
    gae_lambda: float = 0.8
    """GAE λ in [0, 1]: 0 gives one-step TD errors, 1 Monte-Carlo returns minus V"""
    bootstrap_truncation: bool = True
    """bootstrap a time-limit truncation with V(final obs); --no-… treats it as a termination"""
    norm_obs: bool = True
    """normalise observations by running statistics, as ppo_continuous.py"""
    norm_reward: bool = True
    """scale rewards by the std of the running discounted return, as ppo_continuous.py"""

    # --- the run (tooling.py, where importable, adds its own flags) ---
    seed: int = 1
    """seed ≥ 0 of Python, NumPy, torch and the envs; the same seed and flags reproduce a CPU run"""
    num_threads: int = 1
    """torch CPU threads; one suits these small networks; a fixed count keeps runs reproducible"""
    cuda: bool = False
    """train on the GPU (an error if none is found); small networks often run as fast on a CPU"""


# The partially observed envs: base env -> the indices of the velocities in its observation.
NO_VELOCITY = {"CartPole-v1": [1, 3], "Pendulum-v1": [2], "MountainCar-v0": [1],
               "MountainCarContinuous-v0": [1], "LunarLander-v3": [2, 3, 5],
               "LunarLanderContinuous-v3": [2, 3, 5]}


def zero_entries(obs: np.ndarray, indices: list[int]) -> np.ndarray:
    obs = obs.copy()
    obs[indices] = 0.0
    return obs


def make_no_velocity_env(base_id: str, indices: list[int], **kwargs) -> gym.Env:
    """The base env, its observation's `indices` set to 0, shape unchanged."""
    env = gym.make(base_id, **kwargs).unwrapped
    hide = functools.partial(zero_entries, indices=indices)
    return gym.wrappers.TransformObservation(env, hide, env.observation_space)


_entry_point = os.path.basename(__file__).removesuffix(".py") + ":make_no_velocity_env"
for _base, _indices in NO_VELOCITY.items():
    _name, _version = _base.rsplit("-", 1)
    if f"{_name}NoVel-{_version}" not in gym.registry:
        gym.register(f"{_name}NoVel-{_version}", entry_point=_entry_point,
                     max_episode_steps=gym.spec(_base).max_episode_steps,
                     kwargs={"base_id": _base, "indices": _indices})


def make_env(env_id: str, **kwargs) -> gym.Env:
    """The one place where an environment is made: training, evaluation and the checks call it."""
    return gym.make(env_id, **kwargs)


def make_vec_env(env_id: str, num_envs: int) -> gym.vector.VectorEnv:
    envs = gym.vector.SyncVectorEnv([functools.partial(make_env, env_id)] * num_envs,
                                    autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    return gym.wrappers.vector.RecordEpisodeStatistics(envs)


def head(hidden_size: int, out_dim: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(hidden_size, hidden_size), nn.ReLU(),
                         nn.Linear(hidden_size, out_dim))


class RunningMeanStd:
    """Running mean and variance of a stream of batches, merged by Chan et al.'s (1979) formula."""

    def __init__(self, shape: tuple[int, ...] = ()):
        self.mean, self.var, self.count = np.zeros(shape), np.ones(shape), 1e-4

    def update(self, x: np.ndarray) -> None:
        """x: (B, *shape), a batch of B new samples."""
        # math: \delta = \mu_B - \mu, \quad N = n + n_B, \quad \mu \leftarrow \mu + \delta\, n_B / N
        # math: \sigma^2 \leftarrow (n\sigma^2 + n_B\sigma_B^2 + \delta^2 n\, n_B / N) / N
        batch_mean, batch_var, batch_count = x.mean(0), x.var(0), x.shape[0]
        delta, total = batch_mean - self.mean, self.count + batch_count
        self.mean = self.mean + delta * batch_count / total
        m2 = (self.var * self.count + batch_var * batch_count
              + delta**2 * self.count * batch_count / total)
        self.var = m2 / total
        self.count = total


class Agent(nn.Module):
    """Actor π_θ(a|s_{≤t}) and critic V_φ(s_{≤t}), each an LSTM and a head. The recurrent state of
    B envs is one tensor (B, 4H): the actor LSTM's h and c, then the critic's."""

    def __init__(self, obs_dim: int, action_space: gym.Space, hidden_size: int = 64,
                 norm_obs: bool = True):
        super().__init__()
        self.continuous = isinstance(action_space, gym.spaces.Box)
        act_dim = action_space.shape[0] if self.continuous else int(action_space.n)
        self.hidden_size = hidden_size
        self.actor_lstm = nn.LSTM(obs_dim, hidden_size)
        self.critic_lstm = nn.LSTM(obs_dim, hidden_size)
        self.actor_head = head(hidden_size, act_dim)
        self.critic_head = head(hidden_size, 1)
        if self.continuous:
            self.actor_logstd = nn.Parameter(torch.zeros(act_dim))
        self.obs_rms, self.norm_obs = RunningMeanStd((obs_dim,)), norm_obs

    def normalize_obs(self, obs: np.ndarray, update: bool = True) -> np.ndarray:
        """(B, obs_dim) -> (B, obs_dim), by the running statistics (continuous details 6-7)."""
        if not self.norm_obs:
            return obs
        if update:
            self.obs_rms.update(obs)
        # math: \tilde s = \mathrm{clip}\big((s - \mu_s) / \sqrt{\sigma_s^2 + 10^{-8}},\ -c,\ c\big)
        normalized = (obs - self.obs_rms.mean) / np.sqrt(self.obs_rms.var + 1e-8)
        return np.clip(normalized, -10.0, 10.0)

    def get_extra_state(self) -> torch.Tensor:
        return torch.tensor(np.array([self.obs_rms.mean, self.obs_rms.var]))

    def set_extra_state(self, state: torch.Tensor) -> None:
        self.obs_rms.mean, self.obs_rms.var = state.numpy()

    def initial_state(self, num_envs: int) -> torch.Tensor:
        return torch.zeros(num_envs, 4 * self.hidden_size)

    def unroll(self, obs, state, episode_starts):
        """obs (T, B, obs_dim), the state before step 0 (B, 4H) and episode_starts (T, B), 1 where
        obs[t] is an episode's first observation -> the outputs of both LSTMs, (T, B, H) each,
        and the state after step T − 1 (B, 4H)."""
        # One LSTM call per stretch: a state can be reset only between calls.
        cuts = [t for t in range(1, obs.shape[0]) if episode_starts[t].any()]
        actor_out, critic_out = [], []
        for begin, end in itertools.pairwise([0, *cuts, obs.shape[0]]):
            # math: (h_{t-1}, c_{t-1}) \leftarrow (1 - \mathrm{start}_t)\,(h_{t-1}, c_{t-1})
            state = state * (1.0 - episode_starts[begin])[:, None]
            # (1, B, H) each, contiguous: cuDNN's LSTM refuses a non-contiguous state.
            h_actor, c_actor, h_critic, c_critic = (x.contiguous() for x in state[None].chunk(4, 2))
            out, (h_actor, c_actor) = self.actor_lstm(obs[begin:end], (h_actor, c_actor))
            actor_out.append(out)
            out, (h_critic, c_critic) = self.critic_lstm(obs[begin:end], (h_critic, c_critic))
            critic_out.append(out)
            state = torch.cat([h_actor, c_actor, h_critic, c_critic], dim=-1)[0]
        return torch.cat(actor_out), torch.cat(critic_out), state

    def get_value(self, obs, state, episode_starts):
        """obs (T, B, obs_dim), state (B, 4H), episode_starts (T, B) -> V (T, B), state (B, 4H)."""
        _, critic_out, state = self.unroll(obs, state, episode_starts)
        return self.critic_head(critic_out).squeeze(-1), state

    def get_action_and_value(self, obs, state, episode_starts, action=None):
        """obs (T, B, obs_dim), state (B, 4H), episode_starts (T, B) -> the action (T, B) or
        (T, B, act_dim), log π(a|s_{≤t}), entropy and V, (T, B) each, and the new state (B, 4H)."""
        actor_out, critic_out, state = self.unroll(obs, state, episode_starts)
        value = self.critic_head(critic_out).squeeze(-1)
        if self.continuous:
            mean = self.actor_head(actor_out)
            std = self.actor_logstd.expand_as(mean).exp()
            if action is None:
                action = torch.normal(mean, std)
            # math: \log\pi_\theta(a|s) = \sum_j \log\mathcal{N}(a_j; \mu_{\theta,j}(s), \sigma_j^2)
            # math: \log\mathcal{N}(a) = -\frac{(a-\mu)^2}{2\sigma^2} - \log\sigma - \log\sqrt{2\pi}
            log_density = (-((action - mean) ** 2) / (2 * std**2) - std.log()
                           - math.log(math.sqrt(2 * math.pi)))
            logprob = log_density.sum(-1)
            # math: H[\pi_\theta(\cdot|s)] = \sum_j (\tfrac12 + \tfrac12 \log 2\pi + \log \sigma_j)
            entropy = (0.5 + 0.5 * math.log(2 * math.pi) + std.log()).sum(-1)
            return action, logprob, entropy, value, state
        # math: \log \pi_\theta(a|s) = z_a - \log \textstyle\sum_b e^{z_b}
        logits = self.actor_head(actor_out)
        log_pi = logits - logits.logsumexp(-1, keepdim=True)
        if action is None:
            flat = log_pi.reshape(-1, log_pi.shape[-1]).softmax(-1)
            action = torch.multinomial(flat, 1, replacement=True).reshape(log_pi.shape[:-1])
        logprob = log_pi.gather(-1, action[..., None]).squeeze(-1)
        # math: H[\pi_\theta(\cdot|s)] = -\textstyle\sum_a \pi_\theta(a|s) \log \pi_\theta(a|s)
        entropy = -(log_pi * log_pi.softmax(-1)).sum(-1)
        return action, logprob, entropy, value, state

    def greedy_action(self, obs: np.ndarray, memory: torch.Tensor | None = None):
        """obs (obs_dim,) and the state (None at an episode's start) -> action, state (1, 4H)."""
        state = self.initial_state(1) if memory is None else memory
        obs = self.normalize_obs(obs, update=False)
        obs = torch.as_tensor(obs, dtype=torch.float32)[None, None]
        actor_out, _, state = self.unroll(obs, state, torch.zeros(1, 1))
        out = self.actor_head(actor_out)[0, 0]
        return (out.detach().numpy() if self.continuous else int(out.argmax())), state.detach()


def make_agent(args: Args, observation_space, action_space) -> Agent:
    """The Agent for these spaces and flags: `train` builds it so, and tooling.py too."""
    return Agent(observation_space.shape[0], action_space, args.hidden_size, args.norm_obs)


def compute_gae(rewards, values, next_values, terminations, truncations, gamma, gae_lambda):
    """Generalised advantage estimation (Schulman et al. 2016, eq. 16) over a rollout. Inputs are
    (T, N), time-major, with next_values[t] = V(s_{t+1}). Returns (advantages, returns), (T, N).

        δ_t = r_t + γ (1 − terminated_t) V(s_{t+1}) − V(s_t)
        A_t = δ_t + γ λ (1 − done_t) A_{t+1},    done_t = terminated_t or truncated_t,  A_T = 0"""
    deltas = rewards + gamma * (1.0 - terminations) * next_values - values
    not_dones = 1.0 - torch.maximum(terminations, truncations)
    advantages = torch.zeros_like(rewards)
    next_advantage = torch.zeros_like(rewards[0])  # A_{t+1}, shape (N,)
    for t in reversed(range(rewards.shape[0])):
        next_advantage = deltas[t] + gamma * gae_lambda * not_dones[t] * next_advantage
        advantages[t] = next_advantage
    return advantages, advantages + values


def surrogate(ratio, advantages, clip_coef):
    """The clipped surrogate L^CLIP(θ) on B steps, to maximise (Schulman et al. 2017, eq. 7)."""
    # math: L^{CLIP}(\theta) = \frac{1}{B}\sum_t \min(r_t \hat A_t,\ \bar r_t \hat A_t)
    # math: \bar r_t = \mathrm{clip}(r_t(\theta),\ 1 - \epsilon,\ 1 + \epsilon)
    clipped_ratio = torch.clamp(ratio, 1 - clip_coef, 1 + clip_coef)
    return torch.min(ratio * advantages, clipped_ratio * advantages).mean()


def ppo_loss(new_logprob, old_logprob, advantages, new_value, old_value, returns, entropy,
             clip_coef: float, clip_vloss: bool, ent_coef: float, vf_coef: float):
    """The PPO loss to minimise (Schulman et al. 2017, eq. 9), and stats that carry no gradient."""
    # math: r_t(\theta) = \pi_\theta(a_t|s_t) / \pi_{\theta_{old}}(a_t|s_t)
    logratio = new_logprob - old_logprob
    ratio = logratio.exp()
    pg_loss = -surrogate(ratio, advantages, clip_coef)
    # Value loss, with ppo2's clip of V's change around V_old (core detail 9), off by default.
    # math: V^{clip} = V_{old} + \mathrm{clip}(V_\theta(s_t) - V_{old},\ -\epsilon,\ \epsilon)
    # math: L^{V}(\theta) = \tfrac12 \mathbb{E}_t[\max((V_\theta(s_t) - R_t)^2, (V^{clip} - R_t)^2)]
    v_loss_unclipped = (new_value - returns) ** 2
    if clip_vloss:
        v_clipped = old_value + torch.clamp(new_value - old_value, -clip_coef, clip_coef)
        v_loss = 0.5 * torch.max(v_loss_unclipped, (v_clipped - returns) ** 2).mean()
    else:
        v_loss = 0.5 * v_loss_unclipped.mean()
    # math: L(\theta) = -L^{CLIP} + c_1 L^{V} - c_2\, \mathbb{E}_t[H(\pi_\theta(\cdot|s_t))]
    entropy_loss = entropy.mean()
    loss = pg_loss + vf_coef * v_loss - ent_coef * entropy_loss
    with torch.no_grad():
        # Two estimators of KL[π_old ‖ π_θ] from samples a ~ π_old. k3 is unbiased and ≥ 0.
        # math: k_1 = -\log r_t(\theta), \qquad k_3 = (r_t(\theta) - 1) - \log r_t(\theta)
        stats = {key: value.detach() for key, value in {
            "policy_loss": pg_loss, "value_loss": v_loss, "entropy": entropy_loss,
            "old_approx_kl": (-logratio).mean(), "approx_kl": ((ratio - 1) - logratio).mean(),
            "clipfrac": ((ratio - 1.0).abs() > clip_coef).float().mean(),
        }.items()}
    return loss, stats


class RewardScaler:
    def __init__(self, num_envs: int, gamma: float):
        self.return_rms, self.gamma = RunningMeanStd(()), gamma
        self.discounted_return = np.zeros(num_envs)

    def scale(self, reward: np.ndarray, done: np.ndarray) -> np.ndarray:
        """(N,) -> (N,): reward / std of R_t, a running discounted sum of past rewards."""
        # math: R_t = \gamma R_{t-1} + r_t
        # math: \tilde r_t = \mathrm{clip}\big(r_t / \sqrt{\mathrm{Var}[R] + 10^{-8}},\ -c,\ c\big)
        self.discounted_return = self.gamma * self.discounted_return + reward
        self.return_rms.update(self.discounted_return)
        self.discounted_return[done] = 0.0  # the next step starts a new episode
        scaled = reward / np.sqrt(self.return_rms.var + 1e-8)
        return np.clip(scaled, -10.0, 10.0)


def train(args: Args, writer: SummaryWriter | None = None, hook=None) -> dict:
    """Train with recurrent PPO, log to TensorBoard, and return the loop's `state()` at the end."""
    batch_size = args.num_envs * args.num_steps
    envs_per_minibatch = args.num_envs // args.num_minibatches
    num_iterations = args.total_timesteps // batch_size
    # --- seeding: Python, NumPy, torch (action sampling, minibatch order) and the envs ---
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.num_threads)
    device = torch.device("cuda" if args.cuda else "cpu")

    envs = make_vec_env(args.env_id, args.num_envs)
    obs_dim, action_space = envs.single_observation_space.shape[0], envs.single_action_space
    agent = make_agent(args, envs.single_observation_space, action_space).to(device)
    reward_scaler = RewardScaler(args.num_envs, args.gamma)
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5, fused=True)

    # --- rollout storage, time-major: (T, N, ...) ---
    shape = (args.num_steps, args.num_envs)
    obs_np = np.zeros((*shape, obs_dim), dtype=np.float32)
    actions_np = np.zeros((*shape, *action_space.shape),
                          dtype=np.float32 if agent.continuous else np.int64)
    (episode_starts_np, logprobs_np, values_np, final_values_np, rewards_np, terminations_np,
     truncations_np) = (np.zeros(shape, dtype=np.float32) for _ in range(7))

    writer = writer or SummaryWriter()
    table = "\n".join(f"|{k}|{v}|" for k, v in asdict(args).items())
    writer.add_text("hyperparameters", "|param|value|\n|-|-|\n" + table)
    global_step, episodic_returns, next_obs_np = 0, [], None
    # Kept between rollouts: each env's state (N, 4H), and whether its next obs starts an episode.
    next_state = agent.initial_state(args.num_envs).to(device)
    next_episode_start_np = np.ones(args.num_envs, dtype=np.float32)

    def state() -> dict:
        return {"agent": agent, "optimizer": optimizer, "reward_scaler": reward_scaler,
                "envs": envs, "next_obs": next_obs_np, "next_state": next_state,
                "next_episode_start": next_episode_start_np, "global_step": global_step,
                "episodic_returns": episodic_returns, "rng": torch.get_rng_state()}

    if hook:
        loop = hook(state())
        agent, optimizer, reward_scaler = loop["agent"], loop["optimizer"], loop["reward_scaler"]
        envs = loop["envs"]
        next_obs_np, next_state = loop["next_obs"], loop["next_state"]
        next_episode_start_np, global_step = loop["next_episode_start"], loop["global_step"]
        episodic_returns = loop["episodic_returns"]
        torch.set_rng_state(loop["rng"])
    if next_obs_np is None:
        next_obs_np, _ = envs.reset(seed=args.seed)
        next_obs_np = agent.normalize_obs(next_obs_np).astype(np.float32)
        next_episode_start_np = np.ones(args.num_envs, dtype=np.float32)
    start_time, start_step, last_print = time.time(), global_step, 0
    for iteration in range(global_step // batch_size + 1, num_iterations + 1):
        if args.anneal_lr:  # α_i = α (I − i + 1)/I in iteration i of I
            frac = 1.0 - (iteration - 1.0) / num_iterations
            optimizer.param_groups[0]["lr"] = args.learning_rate * frac

        # --- rollout: T steps in each of the N envs with the current policy π_θ ---
        start_state = next_state.clone()  # (N, 4H): the state before step 0, for the replay
        with torch.inference_mode():  # No gradient: the update recomputes log π and V.
            for step in range(args.num_steps):
                global_step += args.num_envs
                obs_np[step], episode_starts_np[step] = next_obs_np, next_episode_start_np
                next_obs = torch.from_numpy(next_obs_np).to(device)
                episode_start = torch.from_numpy(next_episode_start_np).to(device)
                action, logprob, _, value, next_state = agent.get_action_and_value(
                    next_obs[None], next_state, episode_start[None])
                action_np = action[0].cpu().numpy()
                actions_np[step], logprobs_np[step], values_np[step] = (
                    action_np, logprob[0].cpu().numpy(), value[0].cpu().numpy())
                # A Box action reaches the env clipped to its bounds. The batch keeps the sample.
                env_action = action_np
                if agent.continuous:
                    env_action = np.clip(action_np, action_space.low, action_space.high)
                next_obs_np, reward, terminated, truncated, infos = envs.step(env_action)
                if args.norm_reward:
                    reward = reward_scaler.scale(reward, terminated | truncated)
                rewards_np[step] = reward
                terminations_np[step], truncations_np[step] = terminated, truncated
                next_obs_np = agent.normalize_obs(next_obs_np).astype(np.float32)
                # SAME_STEP autoreset: where this step ended an episode, next_obs_np starts one.
                next_episode_start_np = (terminated | truncated).astype(np.float32)
                if truncated.any():  # Bootstrap a cut episode with V of its real final observation.
                    idx = np.flatnonzero(truncated)
                    final_obs_np = np.stack(infos["final_obs"][idx])
                    final_obs_np = agent.normalize_obs(final_obs_np, update=False)
                    final_obs = torch.as_tensor(final_obs_np, dtype=torch.float32, device=device)
                    final_value, _ = agent.get_value(final_obs[None], next_state[idx],
                                                     torch.zeros(1, len(idx), device=device))
                    final_values_np[step, idx] = final_value[0].cpu().numpy()
                for i in np.flatnonzero(infos.get("_episode", [])):
                    episode_return, length = infos["episode"]["r"][i], infos["episode"]["l"][i]
                    writer.add_scalar("charts/episodic_return", episode_return, global_step)
                    writer.add_scalar("charts/episodic_length", length, global_step)
                    episodic_returns.append((global_step, float(episode_return)))

        # --- bootstrap and advantages ---
        (obs, actions, episode_starts, logprobs, values, final_values, rewards, terminations,
         truncations) = (
            torch.tensor(x, device=device)  # (T, N, ...) copies of arrays the next rollout refills
            for x in (obs_np, actions_np, episode_starts_np, logprobs_np, values_np,
                      final_values_np, rewards_np, terminations_np, truncations_np))
        with torch.no_grad():
            next_obs = torch.from_numpy(next_obs_np).to(device)
            episode_start = torch.from_numpy(next_episode_start_np).to(device)
            next_value, _ = agent.get_value(next_obs[None], next_state, episode_start[None])
        # V(s_{t+1}) of every step: the next stored value, or V(final obs) at a truncation.
        next_values = torch.cat([values[1:], next_value])
        next_values = torch.where(truncations.bool(), final_values, next_values)
        terminal = (terminations if args.bootstrap_truncation
                    else torch.maximum(terminations, truncations))
        advantages, returns = compute_gae(rewards, values, next_values, terminal, truncations,
                                          args.gamma, args.gae_lambda)

        # --- update: K epochs, each a random split of the N envs into minibatches ---
        update_stats = []
        for _epoch in range(args.update_epochs):
            env_inds = torch.randperm(args.num_envs, device=device)
            epoch_stats = []
            for start in range(0, args.num_envs, envs_per_minibatch):
                mb = env_inds[start:start + envs_per_minibatch]
                _, new_logprob, entropy, new_value, _ = agent.get_action_and_value(
                    obs[:, mb], start_state[mb], episode_starts[:, mb], actions[:, mb])
                mb_advantages = advantages[:, mb].reshape(-1)
                # Normalised per minibatch (core detail 7).
                if args.norm_adv:
                    mb_advantages = ((mb_advantages - mb_advantages.mean())
                                     / (mb_advantages.std() + 1e-8))
                loss, stats = ppo_loss(new_logprob.reshape(-1), logprobs[:, mb].reshape(-1),
                                       mb_advantages, new_value.reshape(-1),
                                       values[:, mb].reshape(-1), returns[:, mb].reshape(-1),
                                       entropy.reshape(-1), args.clip_coef, args.clip_vloss,
                                       args.ent_coef, args.vf_coef)
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)  # core detail 11
                optimizer.step()
                epoch_stats.append(stats)
            update_stats += epoch_stats
            # Early stop: the policy has already moved far from π_old.
            epoch_kl = torch.stack([s["approx_kl"] for s in epoch_stats]).mean()
            if args.target_kl is not None and epoch_kl > args.target_kl:
                break

        # --- log: every loss is the mean over all minibatches of this update ---
        losses = {key: torch.stack([s[key] for s in update_stats]).mean().item()
                  for key in update_stats[0]}
        for key, value in losses.items():
            writer.add_scalar(f"losses/{key}", value, global_step)
        errors_var, returns_var = (returns - values).var(), returns.var()
        explained_var = (1 - errors_var / returns_var).item() if returns_var > 0 else np.nan
        writer.add_scalar("losses/explained_variance", explained_var, global_step)
        writer.add_scalar("charts/learning_rate", optimizer.param_groups[0]["lr"], global_step)
        sps = (global_step - start_step) / (time.time() - start_time)
        writer.add_scalar("charts/SPS", sps, global_step)
        if time.time() - last_print > 5 or iteration == num_iterations:
            last_print = time.time()
            recent = [r for _, r in episodic_returns[-20:]]
            mean_return = f"{np.mean(recent):8.2f}" if recent else "     n/a"
            eta = int((num_iterations * batch_size - global_step) / sps)
            print(f"step {global_step:>9,}/{num_iterations * batch_size:,} | return (last 20) "
                  f"{mean_return} | SPS {sps:6.0f} | ETA {eta // 60}m{eta % 60:02d}s", flush=True)
        if hook:
            hook(state(), losses)
    envs.close()
    writer.flush()
    return state()


if __name__ == "__main__":
    try:  # tooling.py, beside this file or on the path: checks, checkpoints, resume, evaluation
        import tooling
    except ModuleNotFoundError:
        print("note: training without input checks, checkpoints, --resume or evaluation: "
              "tooling.py beside this file adds them")
        train(tyro.cli(Args))
    else:
        tooling.cli(__file__)
