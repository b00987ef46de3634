"""PPO-clip for continuous actions, in one file.

Proximal Policy Optimization (Schulman et al. 2017, arXiv:1707.06347) with generalised
advantage estimation (Schulman et al. 2016, arXiv:1506.02438), for Gymnasium environments
whose action space is a bounded `Box` (MuJoCo: HalfCheetah, Hopper, Walker2d; Pendulum).

    python ppo_continuous.py --env-id HalfCheetah-v4        # 1M steps
    python ppo_continuous.py --help                         # every flag, with its meaning
    python ppo_continuous.py --save-model                   # writes runs/<run>/model.pt
    python ppo_continuous.py --eval-checkpoint runs/<run>/model.pt --capture-video
    tensorboard --logdir runs

What changes from ppo_discrete.py: the policy is a diagonal Gaussian whose mean is the actor's
output and whose log σ is a learned vector (`Agent`); the sampled action is clipped to the
bounds for the env but stored unclipped; observations are normalised and rewards scaled by
running statistics (`Normalizer`), which are saved with the model; the defaults are CleanRL's
MuJoCo settings (one env, 2048 steps, 32 minibatches, 10 epochs, no entropy bonus).

Defaults follow CleanRL's `ppo_continuous_action.py` and "The 37 implementation details of PPO"
(Huang et al. 2022), cited as "core detail N" from its list of 13 core details and "continuous
detail N" from its 9 details for continuous actions. Deliberate differences, each explained
where it happens: a time-limit truncation (every HalfCheetah episode ends with one) is
bootstrapped with the value of the real final observation (Pardo et al. 2018), the normalisers
live in this file and are saved with the policy, and losses are logged as means over the whole
update. `--no-bootstrap-truncation`, `--no-norm-obs` and `--no-norm-reward` switch details off;
benchmarks/ABLATIONS.md measures what each one buys. Lines starting with `# math:` hold the
LaTeX of the equation the code below computes. The training algorithm ends with `train`; the
tooling after it (input checks, evaluation, checkpoints) can be skipped on a first reading.
"""

import difflib
import importlib.util
import math
import os
import random
import signal
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
    """seed of Python, NumPy, torch and the envs; the same seed and flags reproduce a CPU run"""
    cuda: bool = False
    """train on the GPU (an error if torch finds none); for networks this small the CPU is often
    as fast"""
    num_threads: int = 1
    """torch CPU threads; one suits these small networks; a fixed count keeps runs reproducible"""
    log_dir: str = "runs"
    """folder that holds one sub-folder per run (TensorBoard events, checkpoint, videos)"""
    capture_video: bool = False
    """record videos of the evaluation episodes into <run>/videos (needs: pip install moviepy)"""
    save_model: bool = False
    """save the policy to <run>/model.pt at the end of training, or when interrupted with Ctrl-C"""
    eval_episodes: int = 10
    """episodes played with the mean action after training (0 to skip); printed and logged. An
    env without a time limit has its episodes cut at 10,000 steps"""
    eval_checkpoint: str | None = None
    """instead of training, load this model.pt and evaluate it for --eval-episodes episodes"""
    eval_seed: int | None = None
    """seed of the evaluation; by default the training --seed + 10,000 (seeds the training envs
    never used), also with --eval-checkpoint, which so repeats the evaluation after training"""

    # --- algorithm ---
    env_id: str = "HalfCheetah-v4"
    """Gymnasium id of an env with bounded Box actions and flat Box observations; module:EnvId
    imports module first, which registers an env of your own (README, "Your own environment")"""
    hidden_size: int = 64
    """units in each of the two tanh hidden layers of the actor and of the critic"""
    total_timesteps: int = 1_000_000
    """environment steps to train for, summed over all envs"""
    learning_rate: float = 3e-4
    """Adam step size α; typical 1e-4 to 3e-3"""
    num_envs: int = 1
    """N, environments stepped in parallel (one synchronous vector env)"""
    num_steps: int = 2048
    """T, steps per environment in each rollout; batch size = N·T"""
    anneal_lr: bool = True
    """decay the step size linearly from α to α/K in the last of K updates (core detail 4)"""
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
    """clip the value update to ±ε around the rollout's value prediction, as in PPO's own code"""
    ent_coef: float = 0.0
    """c₂, weight of the entropy bonus"""
    vf_coef: float = 0.5
    """c₁, weight of the value loss"""
    max_grad_norm: float = 0.5
    """the global L2 norm of the gradient is clipped to this value"""
    target_kl: float | None = None
    """stop an update's epochs once an epoch's mean approx-KL exceeds it; typical 0.01 to 0.05"""
    bootstrap_truncation: bool = True
    """bootstrap a time-limit truncation with V(final observation) (Pardo et al. 2018);
    --no-bootstrap-truncation treats it as a termination, as CleanRL does (an ablation)"""
    norm_obs: bool = True
    """normalise observations by running statistics (continuous details 6-7); --no-norm-obs
    gives the networks the raw observations (an ablation)"""
    norm_reward: bool = True
    """scale rewards by the std of the running discounted return (continuous details 8-9);
    --no-norm-reward learns from the raw rewards (an ablation)"""
    clip_obs: float = 10.0
    """normalised observations are clipped to ±clip_obs (continuous detail 7)"""
    clip_reward: float = 10.0
    """scaled rewards are clipped to ±clip_reward (continuous detail 9)"""


def make_env(env_id: str, **kwargs) -> gym.Env:
    """The one place where an environment is made: training, evaluation and the input checks
    all call it, so keyword arguments for your env, or a wrapper, added here apply everywhere
    (README, "Your own environment"). Evaluation passes render_mode for videos."""
    return gym.make(env_id, **kwargs)


def make_vec_env(env_id: str, num_envs: int) -> gym.vector.VectorEnv:
    # Gymnasium 1.x resets a finished sub-environment automatically. We choose the SAME_STEP mode:
    # the step that ends an episode already returns the first observation of the next one, and
    # the real last observation is in infos["final_obs"]. So every stored transition is real (the
    # default NEXT_STEP mode would spend one action per episode on a reset), and the final
    # observation is at hand to bootstrap a truncated episode.
    return gym.vector.SyncVectorEnv([lambda: make_env(env_id) for _ in range(num_envs)],
                                    autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)


def layer_init(layer: nn.Linear, std: float = np.sqrt(2)) -> nn.Linear:
    # Orthogonal weights scaled by `std`, zero biases (core detail 2): √2 for tanh hidden layers;
    # 0.01 for the policy head, so the first mean action is close to 0; 1 for V.
    nn.init.orthogonal_(layer.weight, std)
    nn.init.constant_(layer.bias, 0.0)
    return layer


def mlp(in_dim: int, hidden_size: int, out_dim: int, out_std: float) -> nn.Sequential:
    return nn.Sequential(
        layer_init(nn.Linear(in_dim, hidden_size)), nn.Tanh(),
        layer_init(nn.Linear(hidden_size, hidden_size)), nn.Tanh(),
        layer_init(nn.Linear(hidden_size, out_dim), std=out_std),
    )


class Agent(nn.Module):
    """Separate actor π_θ(a|s) and critic V_φ(s), each a tanh MLP with two hidden layers of
    --hidden-size units, 64 by default (continuous detail 4). The policy is a diagonal Gaussian
    N(μ_θ(s), diag σ²): the actor network gives the mean μ_θ(s); log σ is one learned parameter
    per action dimension, the same in every state (continuous details 1-2)."""

    def __init__(self, obs_dim: int, act_dim: int, hidden_size: int = 64):
        super().__init__()
        self.critic = mlp(obs_dim, hidden_size, 1, out_std=1.0)
        self.actor = mlp(obs_dim, hidden_size, act_dim, out_std=0.01)
        # log σ = 0, so σ = 1 at the start, as in CleanRL and PPO's reference code. vpg.py and
        # reinforce.py start at Spinning Up's σ ≈ 0.61 instead: each script keeps the value of the
        # code whose published results it is compared with. With σ = 1 about a third of the
        # first actions fall outside MuJoCo's [−1, 1] and reach the env clipped (see `train`).
        self.actor_logstd = nn.Parameter(torch.zeros(1, act_dim))

    def get_value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.critic(obs).squeeze(-1)  # (B, 1) -> (B,): one value per observation

    def get_action_and_value(self, obs: torch.Tensor, action: torch.Tensor | None = None):
        """obs (B, obs_dim) -> action (B, act_dim), log π(a|s) (B,), entropy (B,), V(s) (B,).
        Samples an action unless one is given (the update re-evaluates stored actions)."""
        # The Gaussian written out, so that its formulas are on the page (a test checks that it
        # gives torch.distributions.Normal's numbers bit for bit, which is why log σ is computed
        # as log(σ), as the library does).
        mean = self.actor(obs)  # μ_θ(s), (B, act_dim)
        std = self.actor_logstd.expand_as(mean).exp()  # σ, (B, act_dim)
        if action is None:
            action = torch.normal(mean, std)
        # The action dimensions are independent (continuous detail 3), so the density is the
        # product of the per-dimension densities: log-probs and entropies add up over the last axis.
        # math: \log \pi_\theta(a|s) = \sum_i \log \mathcal{N}(a_i;\ \mu_{\theta,i}(s), \sigma_i^2)
        # math: \log \mathcal{N}(a) = -\frac{(a-\mu)^2}{2\sigma^2} - \log\sigma - \log\sqrt{2\pi}
        log_density = (-((action - mean) ** 2) / (2 * std**2) - std.log()
                       - math.log(math.sqrt(2 * math.pi)))  # (B, act_dim)
        logprob = log_density.sum(-1)
        # math: H[\pi_\theta(\cdot|s)] = \sum_i (\tfrac12 + \tfrac12 \log 2\pi + \log \sigma_i)
        entropy = (0.5 + 0.5 * math.log(2 * math.pi) + std.log()).sum(-1)
        return action, logprob, entropy, self.get_value(obs)


def compute_gae(rewards, values, next_values, terminations, truncations, gamma, gae_lambda):
    """Generalised advantage estimation (Schulman et al. 2016, eq. 16) over a rollout.

    All inputs have shape (T, N), time-major. next_values[t] = V(s_{t+1}), the value of the
    observation that really followed step t: on a time-limit truncation that is the final
    observation of the episode, not the reset observation the vector env returned.

        δ_t = r_t + γ (1 − terminated_t) V(s_{t+1}) − V(s_t)
        A_t = δ_t + γ λ (1 − done_t) A_{t+1},    done_t = terminated_t or truncated_t,  A_T = 0

    A terminated step has no future, so it does not bootstrap. A truncated step was cut by a time
    limit the agent cannot see, so its future is estimated by V(final observation) (Pardo et al.
    2018). Either way the recursion stops: A_{t+1} belongs to the next episode. A rollout that
    ends mid-episode bootstraps from V(s_T) through δ_{T-1}. Returns (advantages, returns), both
    (T, N), with returns = A + V, the TD(λ) target of the critic.
    """
    # Every δ_t at once; only the recursion over A needs a loop (run backwards in time).
    deltas = rewards + gamma * (1.0 - terminations) * next_values - values
    not_dones = 1.0 - torch.maximum(terminations, truncations)
    advantages = torch.zeros_like(rewards)
    next_advantage = torch.zeros_like(rewards[0])  # A_{t+1}, shape (N,)
    for t in reversed(range(rewards.shape[0])):
        next_advantage = deltas[t] + gamma * gae_lambda * not_dones[t] * next_advantage
        advantages[t] = next_advantage
    return advantages, advantages + values


def ppo_loss(new_logprob, old_logprob, advantages, new_value, old_value, returns, entropy,
             clip_coef: float, clip_vloss: bool, ent_coef: float, vf_coef: float):
    """The PPO objective on one minibatch, as a loss to minimise (Schulman et al. 2017, eq. 9).

    All inputs have shape (B,). Returns the scalar loss and a dict of detached diagnostics.

    The samples were drawn by π_θ_old, so each one is weighted by the probability ratio
    r_t(θ) = π_θ(a_t|s_t) / π_θ_old(a_t|s_t), an importance weight: in each state,
    E_{a~π_old}[r_t A(s, a)] = E_{a~π_θ}[A(s, a)], the advantage of acting with π_θ instead of
    π_θ_old. At θ = θ_old, ∇_θ r_t = ∇_θ log π_θ(a_t|s_t), so the gradient of r_t Â_t is
    vpg.py's policy gradient. Further away the estimate degrades (the states still come from
    π_θ_old), so the objective must not reward going far: the minimum with the clipped term makes
    it a pessimistic bound on r_t Â_t, where a change of r_t beyond 1 ± ε counts when it lowers
    the objective and not when it raises it. Like every policy-gradient loss this is a surrogate:
    its gradient, not its value, is what matters.
    """
    logratio = new_logprob - old_logprob
    ratio = logratio.exp()  # r_t(θ); 1 (up to rounding) in the first minibatch of the first epoch
    # Clipped surrogate (eq. 7), negated: the max of the negatives is the min of the objectives.
    # A sample gives no gradient only where the clipped term is the smaller one: Â > 0 and
    # r > 1 + ε, or Â < 0 and r < 1 − ε (the step already moved it far enough its way). Where r
    # left [1 − ε, 1 + ε] the other way, the unclipped term is the minimum and pulls r back.
    # math: L^{CLIP}(\theta) = \mathbb{E}_t[\min(r_t \hat A_t,\ \bar r_t \hat A_t)]
    # math: \bar r_t = \mathrm{clip}(r_t,\ 1 - \epsilon,\ 1 + \epsilon)
    pg_loss1 = -advantages * ratio
    pg_loss2 = -advantages * torch.clamp(ratio, 1 - clip_coef, 1 + clip_coef)
    pg_loss = torch.max(pg_loss1, pg_loss2).mean()
    # Value loss. The paper uses (V_θ(s_t) − R_t)². PPO's reference code (openai/baselines ppo2)
    # also clips the change of V around the rollout's prediction, like the ratio (core detail 9).
    # math: V^{clip} = V_{old} + \mathrm{clip}(V_\theta(s_t) - V_{old},\ -\epsilon,\ \epsilon)
    # math: L^{V}(\theta) = \tfrac12 \mathbb{E}_t[\max((V_\theta(s_t) - R_t)^2, (V^{clip} - R_t)^2)]
    v_loss_unclipped = (new_value - returns) ** 2
    if clip_vloss:
        v_clipped = old_value + torch.clamp(new_value - old_value, -clip_coef, clip_coef)
        v_loss = 0.5 * torch.max(v_loss_unclipped, (v_clipped - returns) ** 2).mean()
    else:
        v_loss = 0.5 * v_loss_unclipped.mean()
    # Entropy bonus c₂·H[π_θ(·|s_t)] keeps the policy exploring (eq. 9).
    # math: L(\theta) = -L^{CLIP} + c_1 L^{V} - c_2\, \mathbb{E}_t[H(\pi_\theta(\cdot|s_t))]
    entropy_loss = entropy.mean()
    loss = pg_loss + vf_coef * v_loss - ent_coef * entropy_loss
    with torch.no_grad():
        # Two estimators of KL[π_old ‖ π_θ] from samples a ~ π_old (J. Schulman, "Approximating KL
        # divergence", 2020): k1 is unbiased but noisy and can be negative; k3 is unbiased and ≥ 0.
        # math: k_1 = -\log r_t(\theta), \qquad k_3 = (r_t(\theta) - 1) - \log r_t(\theta)
        # clipfrac is the share of samples with |r − 1| > ε; some of them still give a gradient.
        stats = {
            "policy_loss": pg_loss, "value_loss": v_loss, "entropy": entropy_loss,
            "old_approx_kl": (-logratio).mean(), "approx_kl": ((ratio - 1) - logratio).mean(),
            "clipfrac": ((ratio - 1.0).abs() > clip_coef).float().mean(),
        }
    return loss, stats


class RunningMeanStd:
    """Running mean and variance of a stream of batches, merged with the parallel formula of
    Chan, Golub and LeVeque (1979). Shape (obs_dim,) for observations, () for returns."""

    def __init__(self, shape: tuple[int, ...] = ()):
        # count starts near 0 (not at 0, to avoid a division by 0), so the first batch dominates.
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
        self.count = total  # n ← N


class Normalizer:
    """Observation normalisation and reward scaling (Huang et al. 2022, continuous details 6-9).

    Written here rather than taken from Gymnasium's wrappers so that its state is in plain view
    and goes into the checkpoint: a saved policy is only usable with the statistics it was
    trained with (CleanRL issues #425, #532). `update=False` freezes them, as in evaluation."""

    def __init__(self, obs_dim: int, num_envs: int, gamma: float, clip_obs: float,
                 clip_reward: float):
        self.obs_rms, self.return_rms = RunningMeanStd((obs_dim,)), RunningMeanStd(())
        self.discounted_return = np.zeros(num_envs)  # R_t of each env, for the reward scale
        self.gamma, self.clip_obs, self.clip_reward = gamma, clip_obs, clip_reward

    def normalize_obs(self, obs: np.ndarray, update: bool = True) -> np.ndarray:
        """(B, obs_dim) -> (B, obs_dim). Each feature gets mean 0 and std 1 under the running
        statistics, so that the tanh units are neither saturated nor idle for any feature."""
        if update:
            self.obs_rms.update(obs)
        # math: \tilde s = \mathrm{clip}\big((s - \mu_s) / \sqrt{\sigma_s^2 + 10^{-8}},\ -c,\ c\big)
        normalized = (obs - self.obs_rms.mean) / np.sqrt(self.obs_rms.var + 1e-8)
        return np.clip(normalized, -self.clip_obs, self.clip_obs)

    def scale_reward(self, reward: np.ndarray, done: np.ndarray) -> np.ndarray:
        """(N,) -> (N,). Divide by the std of the running discounted return, not of the reward:
        that puts the value targets, which are discounted returns, on a scale near 1 (the
        reference code's VecNormalize). The mean is not subtracted, so the sign of r is kept."""
        # math: R_t = \gamma R_{t-1} + r_t
        # math: \tilde r_t = \mathrm{clip}\big(r_t / \sqrt{\mathrm{Var}[R] + 10^{-8}},\ -c,\ c\big)
        self.discounted_return = self.gamma * self.discounted_return + reward
        self.return_rms.update(self.discounted_return)
        self.discounted_return[done] = 0.0  # the next step starts a new episode
        scaled = reward / np.sqrt(self.return_rms.var + 1e-8)
        return np.clip(scaled, -self.clip_reward, self.clip_reward)



def train(args: Args) -> dict:
    """Train with PPO; return a summary dict (run_dir, episodic returns, eval returns, ...)."""
    check_args(args)
    batch_size = args.num_envs * args.num_steps
    minibatch_size = batch_size // args.num_minibatches
    num_iterations = args.total_timesteps // batch_size
    # The env id without the module of module:EnvId (Windows forbids a colon in a folder name).
    run_name = f"{args.env_id.rpartition(':')[2]}__{args.exp_name}__{args.seed}__{int(time.time())}"
    run_dir = os.path.join(args.log_dir, run_name)
    writer = SummaryWriter(run_dir)
    table = "\n".join(f"|{k}|{v}|" for k, v in asdict(args).items())
    writer.add_text("hyperparameters", "|param|value|\n|-|-|\n" + table)

    # --- seeding: Python, NumPy, torch (action sampling, minibatch order) and the envs ---
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.num_threads)  # the thread count changes float summation order
    device = torch.device("cuda" if args.cuda else "cpu")

    envs = make_vec_env(args.env_id, args.num_envs)
    obs_dim, act_dim = envs.single_observation_space.shape[0], envs.single_action_space.shape[0]
    action_low, action_high = envs.single_action_space.low, envs.single_action_space.high
    agent = Agent(obs_dim, act_dim, args.hidden_size).to(device)
    normalizer = Normalizer(obs_dim, args.num_envs, args.gamma, args.clip_obs, args.clip_reward)
    # Switched off (--no-norm-obs, an ablation), the networks see the raw observations.
    normalize_obs = normalizer.normalize_obs if args.norm_obs else lambda obs, update=True: obs
    # Adam with ε = 1e-5 instead of 1e-8 (core detail 3); the fused kernel is fastest on a CPU.
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5, fused=True)

    # --- rollout storage, time-major: (T, N, ...) ---
    # NumPy arrays while the rollout runs: a step adds a few numbers, which cost less to store in
    # an array than in a tensor. The whole rollout becomes tensors once, before GAE.
    shape = (args.num_steps, args.num_envs)  # (T, N)
    obs_np = np.zeros((*shape, obs_dim), dtype=np.float32)  # the (normalised) observations
    actions_np = np.zeros((*shape, act_dim), dtype=np.float32)
    logprobs_np, values_np = np.zeros(shape, dtype=np.float32), np.zeros(shape, dtype=np.float32)
    final_values_np = np.zeros(shape, dtype=np.float32)  # V(final obs) at a truncation
    rewards_np, terminations_np, truncations_np = (np.zeros(shape) for _ in range(3))

    global_step, start_time, last_print = 0, time.time(), 0.0
    episode_return, episode_length = np.zeros(args.num_envs), np.zeros(args.num_envs, dtype=int)
    episodic_returns, recent_returns = [], deque(maxlen=20)
    next_obs_np, _ = envs.reset(seed=args.seed)  # env i is seeded with seed + i
    next_obs_np = normalize_obs(next_obs_np).astype(np.float32)  # float32, as the networks are
    stop = stop_on_ctrl_c()  # a Ctrl-C ends the loop after the current update (see below `train`)
    guard = Guard(args, run_dir, writer, agent, normalizer)  # stops the run on NaN or inf
    for iteration in range(1, num_iterations + 1):
        if args.anneal_lr:  # α_k = α (1 − (k − 1)/K) in iteration k of K
            frac = 1.0 - (iteration - 1.0) / num_iterations
            optimizer.param_groups[0]["lr"] = args.learning_rate * frac

        # --- rollout: T steps in each of the N envs with the current policy π_θ_old ---
        # Collecting needs no gradient: the update recomputes log π and V. Inference mode also
        # skips the version counters and view tracking that autograd keeps under no_grad.
        with torch.inference_mode():
            for step in range(args.num_steps):
                global_step += args.num_envs
                obs_np[step] = next_obs_np
                next_obs = torch.from_numpy(next_obs_np).to(device)  # (N, obs_dim)
                action, logprob, _, value = agent.get_action_and_value(next_obs)
                action_np = action.cpu().numpy()
                actions_np[step], logprobs_np[step], values_np[step] = (
                    action_np, logprob.cpu().numpy(), value.cpu().numpy())
                # The Gaussian sample can leave the action bounds. The env gets it clipped; the
                # buffer keeps the sample itself, because log π(a|s) is its density (continuous
                # detail 5).
                env_action = np.clip(action_np, action_low, action_high)
                next_obs_np, reward, terminated, truncated, infos = envs.step(env_action)
                guard.check_env(next_obs_np, reward, infos, global_step)
                scaled_reward = (normalizer.scale_reward(reward, terminated | truncated)
                                 if args.norm_reward else reward)
                rewards_np[step] = scaled_reward
                terminations_np[step], truncations_np[step] = terminated, truncated
                next_obs_np = normalize_obs(next_obs_np).astype(np.float32)
                if truncated.any():  # bootstrap a cut episode with V of its real final observation
                    # A MuJoCo episode that does not fall ends here, at its 1000-step limit (every
                    # HalfCheetah episode does). The final observation is normalised like every
                    # other one (statistics not updated: it is not acted on).
                    idx = np.flatnonzero(truncated)
                    final_obs_np = np.stack(infos["final_obs"][idx])
                    final_obs_np = normalize_obs(final_obs_np, update=False)
                    final_obs = torch.as_tensor(final_obs_np, dtype=torch.float32, device=device)
                    final_values_np[step, idx] = agent.get_value(final_obs).cpu().numpy()
                episode_return += reward  # the raw reward: returns are reported unscaled
                episode_length += 1
                for i in np.flatnonzero(terminated | truncated):
                    writer.add_scalar("charts/episodic_return", episode_return[i], global_step)
                    writer.add_scalar("charts/episodic_length", episode_length[i], global_step)
                    episodic_returns.append((global_step, float(episode_return[i])))
                    recent_returns.append(episode_return[i])
                    episode_return[i], episode_length[i] = 0.0, 0

        # --- bootstrap and advantages ---
        obs, actions, logprobs, values, final_values, rewards, terminations, truncations = (
            torch.tensor(x, dtype=torch.float32, device=device)  # (T, N, ...): copies, the
            for x in (obs_np, actions_np, logprobs_np, values_np, final_values_np, rewards_np,
                      terminations_np, truncations_np))  # arrays are refilled next rollout
        with torch.no_grad():
            next_obs = torch.from_numpy(next_obs_np).to(device)
            next_value = agent.get_value(next_obs)  # V(s_T), (N,)
        # V(s_{t+1}) of every step: the next stored value, or V(final obs) where the episode was
        # truncated. After a termination it is the reset observation's value, masked in GAE.
        next_values = torch.cat([values[1:], next_value[None]])
        next_values = torch.where(truncations.bool(), final_values, next_values)
        # Switched off (--no-bootstrap-truncation, an ablation), a truncation counts as a
        # termination, as in CleanRL: the future of a cut episode is taken to be 0.
        terminal = (terminations if args.bootstrap_truncation
                    else torch.maximum(terminations, truncations))
        advantages, returns = compute_gae(rewards, values, next_values, terminal, truncations,
                                          args.gamma, args.gae_lambda)

        # --- flatten the batch: (T, N, ...) -> (T·N, ...) ---
        b_obs, b_actions = obs.reshape(-1, obs_dim), actions.reshape(-1, act_dim)
        b_logprobs, b_values = logprobs.reshape(-1), values.reshape(-1)
        b_advantages, b_returns = advantages.reshape(-1), returns.reshape(-1)

        # --- update: K epochs, each a random split of the batch into minibatch Adam steps ---
        update_stats = []
        for _epoch in range(args.update_epochs):
            b_inds = torch.randperm(batch_size, device=device)
            epoch_stats = []
            for start in range(0, batch_size, minibatch_size):
                mb_inds = b_inds[start:start + minibatch_size]
                _, new_logprob, entropy, new_value = agent.get_action_and_value(b_obs[mb_inds],
                                                                                b_actions[mb_inds])
                mb_advantages = b_advantages[mb_inds]
                # Normalised per minibatch (core detail 7). Dividing by the std only rescales the
                # step; subtracting the mean is a baseline: it changes this minibatch's estimate,
                # its direction too, but not its expectation, since E[∇ log π] = 0 (apart from
                # the small bias of taking the mean from the same samples).
                if args.norm_adv:
                    mb_mean, mb_std = mb_advantages.mean(), mb_advantages.std()
                    mb_advantages = (mb_advantages - mb_mean) / (mb_std + 1e-8)
                loss, stats = ppo_loss(new_logprob, b_logprobs[mb_inds], mb_advantages, new_value,
                                       b_values[mb_inds], b_returns[mb_inds], entropy,
                                       args.clip_coef, args.clip_vloss, args.ent_coef, args.vf_coef)
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)  # core detail 11
                optimizer.step()
                epoch_stats.append(stats)
            update_stats += epoch_stats
            # Early stop: the policy has already moved far from π_old. Spinning Up's PPO checks the
            # KL after every step against 1.5 × target; like CleanRL, we check once per epoch.
            epoch_kl = torch.stack([s["approx_kl"] for s in epoch_stats]).mean()
            if args.target_kl is not None and epoch_kl > args.target_kl:
                break

        # --- log: every loss is the mean over all minibatches of this update ---
        losses = {key: torch.stack([s[key] for s in update_stats]).mean().item()
                  for key in update_stats[0]}
        guard.check_update(losses, iteration, global_step)
        for key, value in losses.items():
            writer.add_scalar(f"losses/{key}", value, global_step)
        # Explained variance 1 − Var[R − V]/Var[R]: 1 is a perfect critic, ≤ 0 a useless one.
        errors_var, returns_var = (b_returns - b_values).var(), b_returns.var()
        explained_var = (1 - errors_var / returns_var).item() if returns_var > 0 else np.nan
        writer.add_scalar("losses/explained_variance", explained_var, global_step)
        writer.add_scalar("charts/learning_rate", optimizer.param_groups[0]["lr"], global_step)
        sps = global_step / (time.time() - start_time)
        writer.add_scalar("charts/SPS", sps, global_step)
        if time.time() - last_print > 5 or iteration == num_iterations:
            last_print = time.time()
            mean_return = f"{np.mean(recent_returns):8.2f}" if recent_returns else "     n/a"
            eta = int((num_iterations * batch_size - global_step) / sps)
            print(f"step {global_step:>9,}/{num_iterations * batch_size:,} | return (last 20) "
                  f"{mean_return} | SPS {sps:6.0f} | ETA {eta // 60}m{eta % 60:02d}s", flush=True)
        if stop:
            break
    envs.close()
    return finish(args, run_dir, writer, agent, normalizer, global_step, episodic_returns,
                  bool(stop))


# --- tooling: input checks, evaluation, checkpoints, Ctrl-C, guard rails, the command line ---
# Nothing below is part of the learning algorithm: a first reading can stop here.


def fail(message: str):
    """Stop with a one-line error (exit code 1)."""
    raise SystemExit(f"ppo_continuous.py: error: {message}")


def check_args(args: Args) -> None:
    """Reject a bad setup with a one-line message, before anything is built or trained."""
    if tuple(int(part) for part in gym.__version__.split(".")[:2]) < (1, 1):  # AutoresetMode
        fail(f"needs gymnasium 1.1 or newer, found {gym.__version__}: pip install -U gymnasium")
    if args.cuda and not torch.cuda.is_available():
        fail("--cuda: torch finds no usable GPU; leave out --cuda to train on the CPU")
    integers = {"--total-timesteps": args.total_timesteps, "--num-envs": args.num_envs,
                "--num-steps": args.num_steps, "--num-minibatches": args.num_minibatches,
                "--update-epochs": args.update_epochs, "--num-threads": args.num_threads}
    for flag, value in integers.items():
        if value < 1:
            fail(f"{flag} must be a positive integer, got {value}")
    rates = {"--learning-rate": args.learning_rate, "--clip-coef": args.clip_coef,
             "--max-grad-norm": args.max_grad_norm, "--target-kl": args.target_kl,
             "--clip-obs": args.clip_obs, "--clip-reward": args.clip_reward}
    for flag, value in rates.items():
        if value is not None and value <= 0:
            fail(f"{flag} must be positive, got {value}")
    for flag, value in {"--gamma": args.gamma, "--gae-lambda": args.gae_lambda}.items():
        if not 0 <= value <= 1:
            fail(f"{flag} must lie in [0, 1], got {value}")
    if min(args.vf_coef, args.ent_coef, args.eval_episodes) < 0:
        fail("--vf-coef, --ent-coef, --eval-episodes must be >= 0")
    batch_size = args.num_envs * args.num_steps
    if batch_size % args.num_minibatches:
        fail(f"the batch of num_envs × num_steps = {batch_size} steps does not split into "
             f"{args.num_minibatches} minibatches; choose --num-minibatches dividing {batch_size}")
    if args.capture_video and importlib.util.find_spec("moviepy") is None:
        fail("--capture-video needs moviepy: pip install moviepy")  # RecordVideo writes with it
    if args.eval_checkpoint is not None:  # the env id comes from the checkpoint
        if not os.path.isfile(args.eval_checkpoint):
            fail(f"--eval-checkpoint {args.eval_checkpoint}: no such file")
        return
    if args.total_timesteps < batch_size:
        fail(f"--total-timesteps {args.total_timesteps} is less than one batch "
             f"({batch_size} steps)")
    env = make_env_or_fail(args.env_id, "--env-id")
    env.close()
    action_space = env.action_space
    if isinstance(action_space, gym.spaces.Discrete):
        fail(f"{args.env_id} has Discrete actions; use ppo_discrete.py")
    if not (isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1):
        fail(f"{args.env_id} has a {type(action_space).__name__} action space; "
             "ppo_continuous.py supports a flat Box only")
    if not action_space.is_bounded():
        fail(f"{args.env_id} has unbounded actions {action_space}; the script needs bounds")
    observation_space = env.observation_space
    if not (isinstance(observation_space, gym.spaces.Box) and len(observation_space.shape) == 1):
        fail(f"{args.env_id} has observations {observation_space}; the script needs a flat Box")


def make_env_or_fail(env_id: str, source: str) -> gym.Env:
    """make_env(env_id), or a one-line error that says why the env cannot be made here. `source`
    says where the id came from."""
    module, _, name = env_id.rpartition(":")
    try:
        return make_env(env_id)  # imports `module` first, if the id names one
    except gym.error.UnregisteredEnv:
        close = ", ".join(difflib.get_close_matches(name, gym.registry))
        hint = (f"importing {module} did not register {name}" if module else
                f"did you mean {close}?" if close else
                "give it as module:EnvId, with the module that registers it")
        fail(f"unknown env {env_id!r} ({source}); {hint}")
    except ModuleNotFoundError as error:
        fail(f"cannot make env {env_id!r} ({source}): {str(error).rstrip('.')}; a module of "
             "your own must lie beside the script or on PYTHONPATH")
    except gym.error.Error as error:  # e.g. a missing extra: pip install "gymnasium[box2d]"
        fail(f"cannot make env {env_id!r} ({source}): {error}")


def importable_env_id(env_id: str) -> str:
    """The env id as a fresh process can make it: 'module:EnvId' for an env registered outside
    Gymnasium, with the module of its class (importing it registers the env, as a rule)."""
    if ":" in env_id or env_id not in gym.registry:
        return env_id  # it names its module already, or is a short form such as "CartPole"
    entry_point = gym.registry[env_id].entry_point
    module = (entry_point.partition(":")[0] if isinstance(entry_point, str)
              else getattr(entry_point, "__module__", ""))
    if module.partition(".")[0] in ("", "gymnasium", "__main__"):
        return env_id  # Gymnasium's own, or a class no other process can import
    return f"{module}:{env_id}"


def evaluate(agent: Agent, normalizer: Normalizer | None, env_id: str, args: Args, seed: int,
             folder: str):
    """Play --eval-episodes episodes on the CPU with the mean action μ_θ(s), clipped to the
    bounds, seeing observations normalised with the training statistics, frozen (raw ones if
    `normalizer` is None, after --no-norm-obs); film them into <folder>/videos with
    --capture-video; print and return their returns. The seed of the first reset fixes the whole
    sequence of episodes. An env without a time limit gets one of 10,000 steps, so that no
    episode runs for ever."""
    env = make_env(env_id, render_mode="rgb_array") if args.capture_video else make_env(env_id)
    if env.spec is None or env.spec.max_episode_steps is None:  # never an endless episode
        env = gym.wrappers.TimeLimit(env, 10_000)
    if args.capture_video:
        env = gym.wrappers.RecordVideo(env, os.path.join(folder, "videos"), lambda _: True,
                                       disable_logger=True)
    agent, returns, low, high = agent.cpu(), [], env.action_space.low, env.action_space.high
    for episode in range(args.eval_episodes):
        obs, _ = env.reset(seed=seed if episode == 0 else None)
        episode_return, done = 0.0, False
        while not done:
            obs = obs[None]  # a batch of one, (1, obs_dim)
            if normalizer is not None:
                obs = normalizer.normalize_obs(obs, update=False)
            with torch.no_grad():
                mean = agent.actor(torch.as_tensor(obs, dtype=torch.float32))[0]
            obs, reward, terminated, truncated, _ = env.step(np.clip(mean.numpy(), low, high))
            episode_return += float(reward)
            done = terminated or truncated
        returns.append(episode_return)
    env.close()
    print(f"{env_id}: mean return {np.mean(returns):.2f} ± {np.std(returns):.2f} over "
          f"{len(returns)} episodes with the mean action (seed {seed})")
    return returns


def load_checkpoint(path: str) -> tuple[Agent, Normalizer | None, dict]:
    """The agent, the normaliser that its observations need (None after --no-norm-obs) and the
    checkpoint's dict."""
    checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    hidden_size = checkpoint["args"].get("hidden_size", 64)  # saved before the flag existed: 64
    agent = Agent(checkpoint["obs_dim"], checkpoint["act_dim"], hidden_size)
    try:
        agent.load_state_dict(checkpoint["model"])
    except RuntimeError as error:  # `Agent` was edited since: other layers or other shapes
        fail(f"{path} does not fit the networks this file defines "
             f"({str(error).splitlines()[-1].strip()}); evaluate it with the script that saved it")
    args = checkpoint["args"]
    normalizer = Normalizer(checkpoint["obs_dim"], args["num_envs"], args["gamma"],
                            args["clip_obs"], args["clip_reward"])
    state, obs, ret = checkpoint["normalizer"], normalizer.obs_rms, normalizer.return_rms
    obs.mean, obs.var = state["obs_mean"].numpy(), state["obs_var"].numpy()
    ret.mean, ret.var = state["return_mean"].numpy(), state["return_var"].numpy()
    obs.count, ret.count = state["obs_count"], state["return_count"]
    normalizer.discounted_return = state["discounted_return"].numpy()
    return agent, normalizer if args.get("norm_obs", True) else None, checkpoint


def normalizer_state(normalizer: Normalizer) -> dict:
    """The normaliser's statistics, as tensors and numbers for the checkpoint."""
    obs, ret = normalizer.obs_rms, normalizer.return_rms
    return {"obs_mean": torch.tensor(obs.mean), "obs_var": torch.tensor(obs.var),
            "obs_count": obs.count, "return_mean": torch.tensor(ret.mean),
            "return_var": torch.tensor(ret.var), "return_count": ret.count,
            "discounted_return": torch.tensor(normalizer.discounted_return)}


def save_checkpoint(args: Args, run_dir: str, agent: Agent, global_step: int,
                    normalizer: Normalizer) -> str:
    path = os.path.join(run_dir, "model.pt")
    # Only tensors, numbers and strings, so `torch.load(path, weights_only=True)` reads it.
    torch.save({"model": agent.state_dict(), "args": asdict(args), "global_step": global_step,
                "env_id": importable_env_id(args.env_id),  # as --eval-checkpoint makes the env
                "obs_dim": agent.actor[0].in_features, "act_dim": agent.actor[-1].out_features,
                "normalizer": normalizer_state(normalizer)}, path + ".tmp")
    os.replace(path + ".tmp", path)  # all or nothing: a Ctrl-C mid-write leaves no half file
    print(f"model saved to {path}")
    return path


def finish(args: Args, run_dir: str, writer, agent: Agent, normalizer: Normalizer, global_step: int,
           episodic_returns, interrupted: bool) -> dict:
    """After training, or after a Ctrl-C: save the model, evaluate it (unless interrupted), close
    the logs; return a summary of the run."""
    eval_returns, when = [], f"at step {global_step:,}"
    signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C raises KeyboardInterrupt
    try:  # a Ctrl-C while saving or evaluating ends that, and the logs are still flushed below
        if args.save_model:
            save_checkpoint(args, run_dir, agent, global_step, normalizer)
        if args.eval_episodes > 0 and not interrupted:
            # By default seeds the training envs never used, so the evaluation starts from
            # unseen initial states; `main` uses the same seed for --eval-checkpoint.
            seed = args.seed + 10_000 if args.eval_seed is None else args.eval_seed
            eval_returns = evaluate(agent, normalizer if args.norm_obs else None, args.env_id,
                                    args, seed, run_dir)
    except KeyboardInterrupt:
        interrupted, when = True, "after training, while saving or evaluating"
    for i, r in enumerate(eval_returns):
        writer.add_scalar("eval/episodic_return", r, i)
    writer.close()
    if interrupted:
        print(f"interrupted {when}; logs flushed to {run_dir}", file=sys.stderr)
        raise SystemExit(130)  # the shell's code for "stopped by Ctrl-C"
    return {"run_dir": run_dir, "global_step": global_step, "episodic_returns": episodic_returns,
            "eval_returns": eval_returns, "agent": agent, "normalizer": normalizer}


def stop_on_ctrl_c() -> list:
    """From now on Ctrl-C does not raise: it appends to the returned list, which `train` checks
    after each update, so that the run stops there cleanly (logs flushed, the model saved with
    --save-model, exit code 130). A second Ctrl-C stops at once."""
    stop = []

    def handler(signum, frame):
        if stop:
            raise KeyboardInterrupt
        stop.append(signum)
        print("Ctrl-C: stopping after this update (again: at once)", file=sys.stderr)

    signal.signal(signal.SIGINT, handler)
    return stop


class Guard:
    """Stops a run whose numbers stopped making sense with one line that says why, instead of a
    traceback far from the cause or a silently ruined run.

    - After every env step, before anything is stored, normalised or logged: NaN or inf in an
      observation, a reward or a final observation is the environment's fault.
    - After every update: NaN or inf in a loss or a weight means training diverged. The weights
      from before that update are put back, and saved with --save-model.
    - An update that moves the policy absurdly far (approx-KL above 1, where 0.01 to 0.05 is
      usual) gets one warning: the run goes on, but it has probably collapsed.
    - No episode ended in `endless` steps: one warning, which names the likely cause (an env
      without a time limit).
    """

    endless = 100_000  # steps without an episode's end that earn the warning

    def __init__(self, args: Args, run_dir: str, writer: SummaryWriter, agent: Agent,
                 normalizer: Normalizer):
        self.args, self.run_dir, self.writer, self.agent = args, run_dir, writer, agent
        self.normalizer = normalizer
        self.last_finite, self.warned = nn.utils.parameters_to_vector(agent.parameters()), False
        self.last_end, self.warned_endless = 0, False  # the step of the last episode's end

    def check_env(self, obs: np.ndarray, reward: np.ndarray, infos: dict, global_step: int):
        if "final_obs" in infos:  # an episode ended (SAME_STEP autoreset, see `make_vec_env`)
            self.last_end = global_step
        elif global_step - self.last_end >= self.endless and not self.warned_endless:
            self.warned_endless = True
            print(f"ppo_continuous.py: warning: no episode has ended in {self.endless:,} steps; if "
                  f"{self.args.env_id} has no time limit, give it one, e.g. "
                  "gym.make(env_id, max_episode_steps=1000) in make_env", file=sys.stderr)
        # Runs at every step, so the usual case is one cheap test: a sum is finite only if all
        # its terms are (or it overflowed, which the full test below sorts out).
        if math.isfinite(obs.sum() + reward.sum()) and "final_obs" not in infos:
            return
        final_obs = infos["final_obs"][infos["_final_obs"]] if "final_obs" in infos else []
        what = ("observation" if not np.isfinite(obs).all() else
                "reward" if not np.isfinite(reward).all() else
                "final observation" if not all(np.isfinite(o).all() for o in final_obs) else None)
        if what:
            self.stop(f"{self.args.env_id} returned a non-finite {what} (NaN or inf) at step "
                      f"{global_step:,}; the environment needs fixing", global_step, "the model is")

    def check_update(self, losses: dict, iteration: int, global_step: int) -> None:
        bad = ", ".join(name for name, value in losses.items() if not np.isfinite(value))
        weights = nn.utils.parameters_to_vector(self.agent.parameters())  # a copy, (n_weights,)
        if not torch.isfinite(weights).all():
            bad = "the weights"
        if bad:
            nn.utils.vector_to_parameters(self.last_finite, self.agent.parameters())
            self.stop(f"{bad} became NaN or inf in update {iteration} (step "
                      f"{global_step:,}); usual causes: a learning rate or --max-grad-norm too "
                      "large, or rewards of extreme scale", global_step,
                      "the weights from before that update are")
        self.last_finite = weights
        if losses.get("approx_kl", 0) > 1 and not self.warned:
            self.warned = True
            print(f"ppo_continuous.py: warning: update {iteration} moved the policy far from the "
                  f"one that collected the data (approx-KL {losses['approx_kl']:.3g}, where 0.01 "
                  "to 0.05 is usual); the learning rate is probably too large", file=sys.stderr)

    def stop(self, message: str, global_step: int, saved: str):
        """Flush the logs, save the (finite) model with --save-model, exit with code 1."""
        signal.signal(signal.SIGINT, signal.default_int_handler)
        if self.args.save_model:
            path = save_checkpoint(self.args, self.run_dir, self.agent, global_step,
                                   self.normalizer)
            message += f"; {saved} saved in {path}"
        self.writer.close()
        raise SystemExit(f"ppo_continuous.py: error: {message}")


def main(args: Args) -> None:
    """Train, or with --eval-checkpoint evaluate a saved policy on the env it was trained on."""
    if args.eval_checkpoint is None:
        train(args)
        return
    check_args(args)
    agent, normalizer, checkpoint = load_checkpoint(args.eval_checkpoint)
    # The id with the module that registers the env; a checkpoint saved before that has none.
    env_id = checkpoint.get("env_id", checkpoint["args"]["env_id"])
    make_env_or_fail(env_id, f"saved in {args.eval_checkpoint}").close()
    # The seed of the evaluation after training, so that the same model gives the same numbers.
    seed = checkpoint["args"]["seed"] + 10_000 if args.eval_seed is None else args.eval_seed
    evaluate(agent, normalizer, env_id, args, seed, os.path.dirname(args.eval_checkpoint))


if __name__ == "__main__":
    try:
        main(tyro.cli(Args))
    except KeyboardInterrupt:  # Ctrl-C outside the training loop, or a second one inside it
        raise SystemExit(130) from None
