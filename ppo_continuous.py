"""PPO-clip for continuous actions, in one file.

Proximal Policy Optimization (Schulman et al. 2017, arXiv:1707.06347) with generalised
advantage estimation (Schulman et al. 2016, arXiv:1506.02438), for Gymnasium environments
whose action space is a bounded `Box` (MuJoCo: HalfCheetah, Hopper, Walker2d; Pendulum).

    python ppo_continuous.py --env-id HalfCheetah-v4        # 1M steps
    python ppo_continuous.py --help                         # every flag, with its meaning
    python ppo_continuous.py --save-model                   # writes runs/<run>/model.pt
    python ppo_continuous.py --eval-checkpoint runs/<run>/model.pt --capture-video
    tensorboard --logdir runs

Defaults follow CleanRL's `ppo_continuous_action.py` and the "37 implementation details of PPO"
(Huang et al. 2022). Deliberate differences, each explained where it happens: a time-limit
truncation (every MuJoCo episode ends with one) is bootstrapped with the value of the real final
observation (Pardo et al. 2018), the observation and reward normalisers live in this file and
are saved with the policy, so that a loaded policy sees exactly what it saw in training, and
losses are logged as means over the whole update. Lines starting with `# math:` hold the LaTeX
of the equation the code below computes. This file is kept line-aligned with ppo_discrete.py.
"""

import difflib
import math
import os
import random
import sys
import time
from collections import deque
from dataclasses import asdict, dataclass

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import tyro
from torch.utils.tensorboard import SummaryWriter


@dataclass
class Args:
    # --- experiment ---
    exp_name: str = "ppo_continuous"
    """name of the experiment; part of the run directory runs/<env>__<exp>__<seed>__<time>"""
    seed: int = 1
    """seed of Python, NumPy, torch and the environments; the same seed and flags reproduce a CPU run exactly"""
    torch_deterministic: bool = True
    """make cuDNN choose deterministic kernels (only matters with --cuda)"""
    cuda: bool = False
    """train on a GPU if one is present; for these 64-unit networks the CPU is usually as fast"""
    num_threads: int = 1
    """torch CPU threads; one suits these tiny networks, and a fixed count keeps runs reproducible"""
    log_dir: str = "runs"
    """folder that holds one sub-folder per run (TensorBoard events, checkpoint, videos)"""
    capture_video: bool = False
    """record videos of the evaluation episodes into <run>/videos (needs: pip install moviepy)"""
    save_model: bool = False
    """save the policy to <run>/model.pt at the end of training, or when interrupted with Ctrl-C"""
    eval_episodes: int = 10
    """episodes played with the mean action after training (0 to skip); their mean return is printed and logged"""
    eval_checkpoint: str | None = None
    """instead of training, load this model.pt and evaluate it for --eval-episodes episodes"""

    # --- algorithm ---
    env_id: str = "HalfCheetah-v4"
    """Gymnasium id of an environment with a bounded Box action space and a flat Box observation"""
    total_timesteps: int = 1_000_000
    """environment steps to train for, summed over all envs"""
    learning_rate: float = 3e-4
    """Adam step size α; typical 1e-4 to 3e-3"""
    num_envs: int = 1
    """N, environments stepped in parallel (one synchronous vector env)"""
    num_steps: int = 2048
    """T, steps per environment in each rollout; batch size = N·T"""
    anneal_lr: bool = True
    """decay the learning rate linearly from α to 0 over training (Huang et al. 2022, detail 4)"""
    gamma: float = 0.99
    """discount factor γ in [0, 1]"""
    gae_lambda: float = 0.95
    """GAE λ in [0, 1]: 0 gives one-step TD errors, 1 Monte-Carlo returns minus V"""
    num_minibatches: int = 32
    """minibatches per epoch; must divide the batch N·T"""
    update_epochs: int = 10
    """K, passes over each batch; typical 3 to 10"""
    norm_adv: bool = True
    """normalise advantages to mean 0, std 1 within each minibatch"""
    clip_coef: float = 0.2
    """ε of the clipped surrogate objective; typical 0.1 to 0.3"""
    clip_vloss: bool = True
    """clip the value update to ±ε around the rollout's value prediction, as in PPO's reference code"""
    ent_coef: float = 0.0
    """c₂, weight of the entropy bonus"""
    vf_coef: float = 0.5
    """c₁, weight of the value loss"""
    max_grad_norm: float = 0.5
    """the global L2 norm of the gradient is clipped to this value"""
    target_kl: float | None = None
    """stop the epochs of an update early once the mean approx-KL of an epoch exceeds it; typical 0.01 to 0.05"""
    clip_obs: float = 10.0
    """normalised observations are clipped to ±clip_obs"""
    clip_reward: float = 10.0
    """scaled rewards are clipped to ±clip_reward"""


def check_args(args: Args) -> None:
    """Reject a bad setup with a one-line message, before anything is built or trained."""

    def require(ok: bool, message: str) -> None:
        if not ok:
            raise SystemExit(f"ppo_continuous.py: error: {message}")

    flag = {name: "--" + name.replace("_", "-") for name in vars(args)}
    for name in ("total_timesteps", "num_envs", "num_steps", "num_minibatches", "update_epochs", "num_threads"):
        require(getattr(args, name) >= 1, f"{flag[name]} must be a positive integer, got {getattr(args, name)}")
    for name in ("learning_rate", "clip_coef", "max_grad_norm", "clip_obs", "clip_reward"):
        require(getattr(args, name) > 0, f"{flag[name]} must be positive, got {getattr(args, name)}")
    for name in ("gamma", "gae_lambda"):
        require(0 <= getattr(args, name) <= 1, f"{flag[name]} must lie in [0, 1], got {getattr(args, name)}")
    require(min(args.vf_coef, args.ent_coef, args.eval_episodes) >= 0, "--vf-coef, --ent-coef, --eval-episodes must be >= 0")
    require(args.target_kl is None or args.target_kl > 0, f"--target-kl must be positive, got {args.target_kl}")
    batch_size = args.num_envs * args.num_steps
    require(batch_size % args.num_minibatches == 0, f"the batch of num_envs × num_steps = {batch_size} steps does not "
            f"split into {args.num_minibatches} minibatches; choose --num-minibatches dividing {batch_size}")
    if args.capture_video:
        try:
            import moviepy  # noqa: F401  (Gymnasium's RecordVideo writes the files with it)
        except ImportError:
            require(False, "--capture-video needs moviepy: pip install moviepy")
    if args.eval_checkpoint is not None:  # the env id comes from the checkpoint
        require(os.path.isfile(args.eval_checkpoint), f"--eval-checkpoint {args.eval_checkpoint}: no such file")
        return
    require(args.total_timesteps >= batch_size, f"--total-timesteps {args.total_timesteps} is less than one batch "
            f"({batch_size} steps)")
    close = ", ".join(difflib.get_close_matches(args.env_id, list(gym.registry), n=3, cutoff=0.6))
    require(args.env_id in gym.registry, f"unknown --env-id {args.env_id!r}" + (f"; did you mean {close}?" if close else ""))
    env = gym.make(args.env_id)
    action_space, observation_space = env.action_space, env.observation_space
    env.close()
    require(not isinstance(action_space, gym.spaces.Discrete), f"{args.env_id} has Discrete actions; use ppo_discrete.py")
    require(isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1, f"{args.env_id} has a "
            f"{type(action_space).__name__} action space; ppo_continuous.py supports a flat Box only")
    require(bool(np.all(np.isfinite(action_space.low)) and np.all(np.isfinite(action_space.high))),
            f"{args.env_id} has unbounded actions {action_space}; ppo_continuous.py needs finite bounds to clip to")
    require(isinstance(observation_space, gym.spaces.Box) and len(observation_space.shape) == 1,
            f"{args.env_id} has observations {observation_space}; ppo_continuous.py needs a flat Box")


def make_env(env_id: str, num_envs: int) -> gym.vector.VectorEnv:
    # Gymnasium 1.x resets a finished sub-environment automatically. We choose the SAME_STEP mode:
    # the step that ends an episode already returns the first observation of the next one, and the
    # real last observation is in infos["final_obs"]. So every stored transition is real (the
    # default NEXT_STEP mode would spend one action per episode on a reset), and the final
    # observation is at hand to bootstrap a truncated episode.
    return gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="sync",
                        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP})


class RunningMeanStd:
    """Running mean and variance of a stream of batches, merged with the parallel formula of
    Chan, Golub and LeVeque (1979). Shape (obs_dim,) for observations, () for returns."""

    def __init__(self, shape: tuple[int, ...] = ()):
        self.mean, self.var, self.count = np.zeros(shape), np.ones(shape), 1e-4  # the first batch dominates

    def update(self, x: np.ndarray) -> None:
        """x: (B, *shape), a batch of B new samples."""
        # math: \delta = \mu_B - \mu, \qquad \mu \leftarrow \mu + \delta\, n_B / (n + n_B), \qquad n \leftarrow n + n_B
        # math: \sigma^2 \leftarrow \big(n\sigma^2 + n_B\sigma_B^2 + \delta^2\, n\, n_B / (n + n_B)\big) / (n + n_B)
        batch_mean, batch_var, batch_count = x.mean(0), x.var(0), x.shape[0]
        delta, total = batch_mean - self.mean, self.count + batch_count
        self.mean = self.mean + delta * batch_count / total
        self.var = (self.var * self.count + batch_var * batch_count + delta**2 * self.count * batch_count / total) / total
        self.count = total


class Normalizer:
    """Observation normalisation and reward scaling (Huang et al. 2022, continuous details 6-9).

    Written here rather than taken from Gymnasium's wrappers so that its state is in plain view
    and goes into the checkpoint: a saved policy is only usable with the statistics it was
    trained with (CleanRL issues #425, #532). `update=False` freezes them, as in evaluation."""

    def __init__(self, obs_dim: int, num_envs: int, gamma: float, clip_obs: float, clip_reward: float):
        self.obs_rms, self.return_rms = RunningMeanStd((obs_dim,)), RunningMeanStd(())
        self.discounted_return = np.zeros(num_envs)  # R_t of each env, for the reward scale
        self.gamma, self.clip_obs, self.clip_reward = gamma, clip_obs, clip_reward

    def obs(self, obs: np.ndarray, update: bool = True) -> np.ndarray:
        """(B, obs_dim) -> (B, obs_dim). Each feature gets mean 0 and std 1 under the running
        statistics, so that the tanh units are neither saturated nor idle for any feature."""
        if update:
            self.obs_rms.update(obs)
        # math: \tilde s = \mathrm{clip}\big((s - \mu_s) / \sqrt{\sigma_s^2 + 10^{-8}},\ -c,\ c\big)
        return np.clip((obs - self.obs_rms.mean) / np.sqrt(self.obs_rms.var + 1e-8), -self.clip_obs, self.clip_obs)

    def reward(self, reward: np.ndarray, done: np.ndarray) -> np.ndarray:
        """(N,) -> (N,). Divide by the std of the running discounted return, not of the reward:
        that puts the value targets, which are discounted returns, on a scale near 1 (the
        reference code's VecNormalize). The mean is not subtracted, so the sign of r is kept."""
        # math: R_t = \gamma R_{t-1} + r_t, \qquad \tilde r_t = \mathrm{clip}(r_t / \sqrt{\mathrm{Var}[R] + 10^{-8}},\ -c,\ c)
        self.discounted_return = self.gamma * self.discounted_return + reward
        self.return_rms.update(self.discounted_return)
        self.discounted_return[done] = 0.0  # the next step starts a new episode
        return np.clip(reward / np.sqrt(self.return_rms.var + 1e-8), -self.clip_reward, self.clip_reward)

    def state_dict(self) -> dict:
        return {"obs_mean": torch.tensor(self.obs_rms.mean), "obs_var": torch.tensor(self.obs_rms.var),
                "obs_count": self.obs_rms.count, "return_mean": torch.tensor(self.return_rms.mean),
                "return_var": torch.tensor(self.return_rms.var), "return_count": self.return_rms.count,
                "discounted_return": torch.tensor(self.discounted_return)}

    def load_state_dict(self, state: dict) -> None:
        self.obs_rms.mean, self.obs_rms.var = state["obs_mean"].numpy(), state["obs_var"].numpy()
        self.return_rms.mean, self.return_rms.var = state["return_mean"].numpy(), state["return_var"].numpy()
        self.obs_rms.count, self.return_rms.count = state["obs_count"], state["return_count"]
        self.discounted_return = state["discounted_return"].numpy()


def layer_init(layer: nn.Linear, std: float = np.sqrt(2), bias_const: float = 0.0) -> nn.Linear:
    # Orthogonal weights scaled by `std`, zero biases (Huang et al. 2022, detail 2): √2 for tanh
    # hidden layers; 0.01 for the policy head, so the first mean action is close to 0; 1 for V.
    nn.init.orthogonal_(layer.weight, std)
    nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    """Separate actor π_θ(a|s) and critic V_φ(s), each a 64-64 tanh MLP (continuous detail 4).
    The policy is a diagonal Gaussian N(μ_θ(s), diag σ²): the actor network gives the mean μ_θ(s);
    log σ is one learned parameter per action dimension, the same in every state (details 1-3)."""

    def __init__(self, obs_dim: int, act_dim: int):
        super().__init__()
        self.critic = nn.Sequential(
            layer_init(nn.Linear(obs_dim, 64)), nn.Tanh(),
            layer_init(nn.Linear(64, 64)), nn.Tanh(),
            layer_init(nn.Linear(64, 1), std=1.0),
        )
        self.actor = nn.Sequential(
            layer_init(nn.Linear(obs_dim, 64)), nn.Tanh(),
            layer_init(nn.Linear(64, 64)), nn.Tanh(),
            layer_init(nn.Linear(64, act_dim), std=0.01),
        )
        self.actor_logstd = nn.Parameter(torch.zeros(1, act_dim))  # σ = 1 at the start: wide exploration

    def get_value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.critic(obs).squeeze(-1)  # (B, 1) -> (B,): one value per observation

    def get_action_and_value(self, obs: torch.Tensor, action: torch.Tensor | None = None):
        """obs (B, obs_dim) -> action (B, act_dim), log π(a|s) (B,), entropy (B,), V(s) (B,).
        Samples an action unless one is given (the update re-evaluates stored actions)."""
        # The Gaussian written out: the same arithmetic, in the same order (so the same results,
        # bit for bit; hence log σ computed as log(σ)) as torch.distributions.Normal, at a fraction
        # of its cost per call on a CPU, where building a distribution object costs more than the math.
        mean = self.actor(obs)  # μ_θ(s), (B, act_dim)
        std = self.actor_logstd.expand_as(mean).exp()  # σ, (B, act_dim)
        if action is None:
            action = torch.normal(mean, std)
        # The action dimensions are independent, so the joint density is the product of the
        # per-dimension densities: log-probs and entropies add up over the last axis (detail 3).
        # math: \log \pi_\theta(a|s) = \sum_{i=1}^{d} \log \mathcal{N}(a_i;\, \mu_{\theta,i}(s), \sigma_i^2)
        # math: \log \mathcal{N}(a_i; \mu_i, \sigma_i^2) = -\frac{(a_i - \mu_i)^2}{2\sigma_i^2} - \log \sigma_i - \log\sqrt{2\pi}
        log_prob = (-((action - mean) ** 2) / (2 * std**2) - std.log() - math.log(math.sqrt(2 * math.pi))).sum(-1)
        # math: H[\pi_\theta(\cdot|s)] = \sum_{i=1}^{d} (\tfrac12 + \tfrac12\log 2\pi + \log\sigma_i)
        entropy = (0.5 + 0.5 * math.log(2 * math.pi) + std.log()).sum(-1)
        return action, log_prob, entropy, self.get_value(obs)


def compute_gae(rewards, values, next_values, terminations, truncations, gamma: float, gae_lambda: float):
    """Generalised advantage estimation (Schulman et al. 2016, eq. 16) over a rollout.

    All inputs have shape (T, N), time-major. next_values[t] = V(s_{t+1}), the value of the
    observation that really followed step t: on a time-limit truncation that is the final
    observation of the episode, not the reset observation the vector env returned.

        δ_t = r_t + γ (1 − terminated_t) V(s_{t+1}) − V(s_t)
        A_t = δ_t + γ λ (1 − done_t) A_{t+1},       done_t = terminated_t or truncated_t,  A_T = 0

    A terminated step has no future, so it does not bootstrap. A truncated step was cut by a time
    limit the agent cannot see, so its future is estimated by V(final observation) (Pardo et al.
    2018). Either way the recursion stops: A_{t+1} belongs to the next episode. A rollout that
    ends mid-episode bootstraps from V(s_T) through δ_{T-1}. Returns (advantages, returns), both
    (T, N), with returns = A + V, the TD(λ) target of the critic.
    """
    # Every δ_t at once; only the recursion over A needs a loop (run backwards in time).
    # math: \delta_t = r_t + \gamma (1 - \text{terminated}_t) V(s_{t+1}) - V(s_t)
    deltas = rewards + gamma * (1.0 - terminations) * next_values - values
    not_dones = 1.0 - torch.maximum(terminations, truncations)
    advantages = torch.zeros_like(rewards)
    next_advantage = torch.zeros_like(rewards[0])  # A_{t+1}, shape (N,)
    for t in reversed(range(rewards.shape[0])):
        # math: \hat A_t = \delta_t + \gamma \lambda (1 - \text{done}_t) \hat A_{t+1}
        next_advantage = deltas[t] + gamma * gae_lambda * not_dones[t] * next_advantage
        advantages[t] = next_advantage
    return advantages, advantages + values


def ppo_loss(new_logprob, old_logprob, advantages, new_value, old_value, returns, entropy,
             clip_coef: float, clip_vloss: bool, ent_coef: float, vf_coef: float):
    """The PPO objective on one minibatch, as a loss to minimise (Schulman et al. 2017, eq. 9).

    All inputs have shape (B,). Returns the scalar loss and a dict of detached diagnostics.
    Like every policy-gradient loss this is a surrogate: its gradient, not its value, is what
    matters, and its value says nothing about how well the policy performs.
    """
    logratio = new_logprob - old_logprob
    ratio = logratio.exp()  # r_t(θ) = π_θ(a_t|s_t) / π_θ_old(a_t|s_t); 1 at the first minibatch
    # Clipped surrogate (eq. 7), negated: the max of the negatives is the min of the objectives.
    # Where the clip is active the loss does not depend on θ, so that sample gives no gradient.
    # math: L^{CLIP}(\theta) = \mathbb{E}_t[\min(r_t(\theta)\hat A_t, \mathrm{clip}(r_t(\theta), 1-\epsilon, 1+\epsilon)\hat A_t)]
    pg_loss1 = -advantages * ratio
    pg_loss2 = -advantages * torch.clamp(ratio, 1 - clip_coef, 1 + clip_coef)
    pg_loss = torch.max(pg_loss1, pg_loss2).mean()
    # Value loss. The paper uses (V_θ(s_t) − R_t)². PPO's reference code (openai/baselines ppo2)
    # also clips the change of V around the rollout's prediction, like the ratio (detail 9).
    # math: V^{clip} = V_{old}(s_t) + \mathrm{clip}(V_\theta(s_t) - V_{old}(s_t), -\epsilon, \epsilon)
    # math: L^{V}(\theta) = \tfrac12 \mathbb{E}_t[\max((V_\theta(s_t) - R_t)^2,\ (V^{clip} - R_t)^2)]
    v_loss_unclipped = (new_value - returns) ** 2
    if clip_vloss:
        v_clipped = old_value + torch.clamp(new_value - old_value, -clip_coef, clip_coef)
        v_loss = 0.5 * torch.max(v_loss_unclipped, (v_clipped - returns) ** 2).mean()
    else:
        v_loss = 0.5 * v_loss_unclipped.mean()
    # Entropy bonus c₂·H[π_θ(·|s_t)] keeps the policy exploring (eq. 9).
    # math: L(\theta) = -L^{CLIP}(\theta) + c_1 L^{V}(\theta) - c_2\, \mathbb{E}_t\big[H[\pi_\theta(\cdot|s_t)]\big]
    entropy_loss = entropy.mean()
    loss = pg_loss + vf_coef * v_loss - ent_coef * entropy_loss
    with torch.no_grad():
        # Two estimators of KL[π_old ‖ π_θ] from samples a ~ π_old (J. Schulman, "Approximating
        # KL divergence", 2020): k1 is unbiased but noisy and can be negative; k3 is unbiased and ≥ 0.
        # math: k_1 = -\log r_t(\theta), \qquad k_3 = (r_t(\theta) - 1) - \log r_t(\theta)
        stats = {
            "policy_loss": pg_loss, "value_loss": v_loss, "entropy": entropy_loss,
            "old_approx_kl": (-logratio).mean(), "approx_kl": ((ratio - 1) - logratio).mean(),
            "clipfrac": ((ratio - 1.0).abs() > clip_coef).float().mean(),
        }
    return loss, stats


def evaluate(agent: Agent, normalizer: Normalizer, env_id: str, episodes: int, seed: int, device: torch.device,
             video_dir: str | None = None) -> list[float]:
    """Play `episodes` episodes with the mean action μ_θ(s), clipped to the bounds, seeing
    observations normalised with the training statistics, frozen; return the episodes' returns."""
    env = gym.make(env_id, render_mode="rgb_array" if video_dir else None)
    if video_dir:
        env = gym.wrappers.RecordVideo(env, video_dir, episode_trigger=lambda _: True, disable_logger=True)
    low, high = env.action_space.low, env.action_space.high
    returns = []
    for episode in range(episodes):
        obs, _ = env.reset(seed=seed if episode == 0 else None)  # one seed fixes the whole sequence
        episode_return, done = 0.0, False
        while not done:
            obs = normalizer.obs(obs[None], update=False)
            with torch.no_grad():
                mean = agent.actor(torch.as_tensor(obs, dtype=torch.float32, device=device))[0]
            obs, reward, terminated, truncated, _ = env.step(np.clip(mean.cpu().numpy(), low, high))
            episode_return += float(reward)
            done = terminated or truncated
        returns.append(episode_return)
    env.close()
    return returns


def save_checkpoint(path: str, agent: Agent, normalizer: Normalizer, args: Args, global_step: int) -> None:
    # Plain tensors, numbers and strings only, so `torch.load(path, weights_only=True)` can read it.
    torch.save({"model": agent.state_dict(), "args": asdict(args), "global_step": global_step,
                "obs_dim": agent.actor[0].in_features, "act_dim": agent.actor[-1].out_features,
                "normalizer": normalizer.state_dict()}, path)


def load_checkpoint(path: str, device: torch.device) -> tuple[Agent, Normalizer, dict]:
    checkpoint = torch.load(path, map_location=device, weights_only=True)
    agent = Agent(checkpoint["obs_dim"], checkpoint["act_dim"]).to(device)
    agent.load_state_dict(checkpoint["model"])
    args = checkpoint["args"]
    normalizer = Normalizer(checkpoint["obs_dim"], args["num_envs"], args["gamma"], args["clip_obs"], args["clip_reward"])
    normalizer.load_state_dict(checkpoint["normalizer"])
    return agent, normalizer, checkpoint


def evaluate_checkpoint(args: Args) -> list[float]:
    """Evaluate a saved policy on the environment it was trained on (CLI: --eval-checkpoint)."""
    check_args(args)
    device = torch.device("cuda" if args.cuda and torch.cuda.is_available() else "cpu")
    agent, normalizer, checkpoint = load_checkpoint(args.eval_checkpoint, device)
    env_id = checkpoint["args"]["env_id"]
    video_dir = os.path.join(os.path.dirname(args.eval_checkpoint), "videos") if args.capture_video else None
    returns = evaluate(agent, normalizer, env_id, args.eval_episodes, args.seed, device, video_dir)
    print(f"{env_id}: mean return {np.mean(returns):.2f} ± {np.std(returns):.2f} over {len(returns)} episodes (mean action)")
    return returns


def train(args: Args) -> dict:
    """Train with PPO; return a summary dict (run_dir, episodic returns, eval returns, ...)."""
    check_args(args)
    batch_size = args.num_envs * args.num_steps
    minibatch_size = batch_size // args.num_minibatches
    num_iterations = args.total_timesteps // batch_size
    run_name = f"{args.env_id}__{args.exp_name}__{args.seed}__{int(time.time())}"
    run_dir = os.path.join(args.log_dir, run_name)
    writer = SummaryWriter(run_dir)
    writer.add_text("hyperparameters", "|param|value|\n|-|-|\n" + "\n".join(f"|{k}|{v}|" for k, v in asdict(args).items()))

    # --- seeding: Python, NumPy, torch (action sampling, minibatch order) and the envs ---
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic
    torch.set_num_threads(args.num_threads)  # the thread count changes float summation order
    device = torch.device("cuda" if args.cuda and torch.cuda.is_available() else "cpu")

    envs = make_env(args.env_id, args.num_envs)
    obs_dim, act_dim = envs.single_observation_space.shape[0], envs.single_action_space.shape[0]
    action_low, action_high = envs.single_action_space.low, envs.single_action_space.high
    agent = Agent(obs_dim, act_dim).to(device)
    normalizer = Normalizer(obs_dim, args.num_envs, args.gamma, args.clip_obs, args.clip_reward)
    # Adam with ε = 1e-5 instead of 1e-8 (detail 3); the fused kernel is the fastest Adam on CPU.
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5, fused=True)

    # --- rollout storage, time-major: (T, N, ...) ---
    obs = torch.zeros((args.num_steps, args.num_envs, obs_dim), device=device)
    actions = torch.zeros((args.num_steps, args.num_envs, act_dim), device=device)
    logprobs = torch.zeros((args.num_steps, args.num_envs), device=device)
    rewards = torch.zeros((args.num_steps, args.num_envs), device=device)
    terminations = torch.zeros((args.num_steps, args.num_envs), device=device)
    truncations = torch.zeros((args.num_steps, args.num_envs), device=device)
    values = torch.zeros((args.num_steps, args.num_envs), device=device)
    final_values = torch.zeros((args.num_steps, args.num_envs), device=device)  # V(final obs) where truncated

    global_step, start_time, last_print = 0, time.time(), 0.0
    episode_return, episode_length = np.zeros(args.num_envs), np.zeros(args.num_envs, dtype=int)
    episodic_returns, recent_returns = [], deque(maxlen=20)
    next_obs_np, _ = envs.reset(seed=args.seed)  # env i is seeded with seed + i
    next_obs = torch.as_tensor(normalizer.obs(next_obs_np), dtype=torch.float32, device=device)
    interrupted = False
    try:
        for iteration in range(1, num_iterations + 1):
            if args.anneal_lr:
                # math: \alpha_k = \alpha \left(1 - \frac{k-1}{K}\right), \quad k = 1..K \text{ iterations}
                optimizer.param_groups[0]["lr"] = args.learning_rate * (1.0 - (iteration - 1.0) / num_iterations)

            # --- rollout: T steps in each of the N envs with the current policy π_θ_old ---
            for step in range(args.num_steps):
                global_step += args.num_envs
                obs[step] = next_obs
                with torch.no_grad():  # acting needs no gradient; the update recomputes log π
                    action, logprob, _, value = agent.get_action_and_value(next_obs)
                actions[step], logprobs[step], values[step] = action, logprob, value
                # The Gaussian sample can leave the action bounds. The env gets it clipped; the buffer
                # keeps the sample itself, because log π(a|s) is the density of the sample (detail 5).
                action_np = action.cpu().numpy()
                next_obs_np, reward, terminated, truncated, infos = envs.step(np.clip(action_np, action_low, action_high))
                rewards[step] = torch.as_tensor(normalizer.reward(reward, terminated | truncated), device=device)
                terminations[step] = torch.as_tensor(terminated, device=device)
                truncations[step] = torch.as_tensor(truncated, device=device)
                next_obs = torch.as_tensor(normalizer.obs(next_obs_np), dtype=torch.float32, device=device)
                if truncated.any():  # bootstrap value of a cut episode: V of its real final observation
                    # Every MuJoCo episode ends here, at its 1000-step limit. The final observation is
                    # normalised like every other one (statistics not updated: it is not acted on).
                    idx = np.flatnonzero(truncated)
                    final_obs_np = normalizer.obs(np.stack(infos["final_obs"][idx]), update=False)
                    final_obs = torch.as_tensor(final_obs_np, dtype=torch.float32, device=device)
                    with torch.no_grad():
                        final_values[step, idx] = agent.get_value(final_obs)
                episode_return += reward  # the raw reward: returns are reported unscaled
                episode_length += 1
                for i in np.flatnonzero(terminated | truncated):
                    writer.add_scalar("charts/episodic_return", episode_return[i], global_step)
                    writer.add_scalar("charts/episodic_length", episode_length[i], global_step)
                    episodic_returns.append((global_step, float(episode_return[i])))
                    recent_returns.append(episode_return[i])
                    episode_return[i], episode_length[i] = 0.0, 0

            # --- bootstrap and advantages ---
            with torch.no_grad():
                next_value = agent.get_value(next_obs)  # V(s_T), (N,)
            # V(s_{t+1}) of every step: the next stored value, or V(final obs) where the episode was
            # truncated. After a termination it is the reset observation's value, masked in GAE.
            next_values = torch.cat([values[1:], next_value[None]])
            next_values = torch.where(truncations.bool(), final_values, next_values)
            advantages, returns = compute_gae(rewards, values, next_values, terminations, truncations,
                                              args.gamma, args.gae_lambda)

            # --- flatten the batch: (T, N, ...) -> (T·N, ...) ---
            b_obs = obs.reshape(-1, obs_dim)
            b_actions = actions.reshape(-1, act_dim)
            b_logprobs, b_values = logprobs.reshape(-1), values.reshape(-1)
            b_advantages, b_returns = advantages.reshape(-1), returns.reshape(-1)

            # --- update: K epochs of minibatch Adam steps on L(θ) ---
            update_stats = []
            for _epoch in range(args.update_epochs):
                b_inds = torch.randperm(batch_size, device=device)
                epoch_stats = []
                for start in range(0, batch_size, minibatch_size):
                    mb_inds = b_inds[start:start + minibatch_size]
                    _, new_logprob, entropy, new_value = agent.get_action_and_value(b_obs[mb_inds], b_actions[mb_inds])
                    mb_advantages = b_advantages[mb_inds]
                    if args.norm_adv:  # per minibatch (detail 7); changes the scale, not the direction
                        mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)
                    loss, stats = ppo_loss(new_logprob, b_logprobs[mb_inds], mb_advantages, new_value,
                                           b_values[mb_inds], b_returns[mb_inds], entropy,
                                           args.clip_coef, args.clip_vloss, args.ent_coef, args.vf_coef)
                    optimizer.zero_grad()
                    loss.backward()
                    nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)  # detail 11
                    optimizer.step()
                    epoch_stats.append(stats)
                update_stats += epoch_stats
                # Early stop (as in Spinning Up's PPO): the policy has already moved far from π_old.
                if args.target_kl is not None and torch.stack([s["approx_kl"] for s in epoch_stats]).mean() > args.target_kl:
                    break

            # --- log: every loss is the mean over all minibatches of this update ---
            for key in update_stats[0]:
                writer.add_scalar(f"losses/{key}", torch.stack([s[key] for s in update_stats]).mean().item(), global_step)
            # Fraction of the variance of the returns that the critic explains: 1 is perfect, ≤ 0 is useless.
            # math: \mathrm{EV} = 1 - \mathrm{Var}[R - V] / \mathrm{Var}[R]
            var_returns = b_returns.var()
            explained_var = (1 - (b_returns - b_values).var() / var_returns).item() if var_returns > 0 else float("nan")
            writer.add_scalar("losses/explained_variance", explained_var, global_step)
            writer.add_scalar("charts/learning_rate", optimizer.param_groups[0]["lr"], global_step)
            sps = global_step / (time.time() - start_time)
            writer.add_scalar("charts/SPS", sps, global_step)
            if time.time() - last_print > 5 or iteration == num_iterations:
                last_print = time.time()
                mean_return = f"{np.mean(recent_returns):8.2f}" if recent_returns else "     n/a"
                eta = (num_iterations * batch_size - global_step) / sps
                print(f"step {global_step:>9,}/{num_iterations * batch_size:,} | return (last 20) {mean_return} | "
                      f"SPS {sps:6.0f} | ETA {int(eta) // 60}m{int(eta) % 60:02d}s", flush=True)
    except KeyboardInterrupt:
        interrupted = True
        print(f"interrupted at step {global_step:,}; logs flushed to {run_dir}", file=sys.stderr)
    finally:
        envs.close()
        writer.flush()

    if args.save_model:
        save_checkpoint(os.path.join(run_dir, "model.pt"), agent, normalizer, args, global_step)
        print(f"model saved to {os.path.join(run_dir, 'model.pt')}")
    eval_returns = []
    if args.eval_episodes > 0 and not interrupted:
        video_dir = os.path.join(run_dir, "videos") if args.capture_video else None
        # Seeds the training envs never used, so the evaluation starts from unseen initial states.
        eval_returns = evaluate(agent, normalizer, args.env_id, args.eval_episodes, args.seed + 10_000, device, video_dir)
        for i, r in enumerate(eval_returns):
            writer.add_scalar("eval/episodic_return", r, i)
        print(f"evaluation: mean return {np.mean(eval_returns):.2f} ± {np.std(eval_returns):.2f} "
              f"over {len(eval_returns)} episodes (mean action)")
    writer.close()
    if interrupted:
        raise SystemExit(130)  # the shell's code for "stopped by Ctrl-C"
    return {"run_dir": run_dir, "global_step": global_step, "episodic_returns": episodic_returns,
            "eval_returns": eval_returns, "agent": agent, "normalizer": normalizer}


if __name__ == "__main__":
    cli_args = tyro.cli(Args)
    if cli_args.eval_checkpoint is not None:
        evaluate_checkpoint(cli_args)
    else:
        train(cli_args)
