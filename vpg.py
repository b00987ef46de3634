"""Vanilla policy gradient (VPG) with a learned value baseline and GAE-λ, in one file.

The policy gradient with a critic as baseline (Sutton et al. 2000; Williams 1992, §4) and
generalised advantage estimation (Schulman et al. 2016, arXiv:1506.02438), as OpenAI's Spinning
Up defines VPG: one policy-gradient step per batch, then many regression steps on the critic.
For Gymnasium environments with `Discrete` actions (CartPole-v1, LunarLander-v3) or `Box`
actions (Pendulum-v1, HalfCheetah-v4).

    python vpg.py                                           # CartPole-v1, 2M steps
    python vpg.py --env-id HalfCheetah-v4 --total-timesteps 1000000
    python vpg.py --help                                    # every flag, with its meaning
    python vpg.py --save-model                              # writes runs/<run>/model.pt
    python vpg.py --eval-checkpoint runs/<run>/model.pt --capture-video
    tensorboard --logdir runs

What changes from reinforce.py: a critic V_φ(s) learns to predict the return, and the weight of
each log-probability becomes the advantage Â_t (GAE-λ), the return measured against that
prediction. Because V estimates the rewards after a cut, a batch is a fixed T steps per env that
may end mid-episode, and a time-limit truncation is bootstrapped with V(final observation); so
the rollout is PPO's, not REINFORCE's episode collector. Advantages are normalised over the
batch; the critic has its own Adam and takes `vf_iters` steps per batch.

Defaults follow Spinning Up's `vpg.py` (4000 steps per batch, π lr 3e-4, V lr 1e-3, 80 critic
steps, γ 0.99, λ 0.97, no observation normalisation). Unlike PPO, VPG takes a single gradient
step per batch: the estimate is only valid at the policy that collected the data, and VPG has
no ratio or clip to keep a second step honest. Lines starting with `# math:` hold the LaTeX of
the equation the code below computes. The training algorithm ends with `train`; the tooling
after it (input checks, evaluation, checkpoints) can be skipped on a first reading.
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
    exp_name: str = "vpg"
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
    """deterministic episodes (most likely / mean action) played after training (0 to skip). An
    env without a time limit has its episodes cut at 10,000 steps"""
    eval_checkpoint: str | None = None
    """instead of training, load this model.pt and evaluate it for --eval-episodes episodes"""
    eval_seed: int | None = None
    """seed of the evaluation; by default the training --seed + 10,000 (seeds the training envs
    never used), also with --eval-checkpoint, which so repeats the evaluation after training"""

    # --- algorithm ---
    env_id: str = "CartPole-v1"
    """Gymnasium id of an env with Discrete or Box actions and flat Box observations; the form
    module:EnvId imports module first, which registers an env of your own (README)"""
    hidden_size: int = 64
    """units in each of the two tanh hidden layers of the actor and of the critic"""
    total_timesteps: int = 2_000_000
    """environment steps to train for, summed over all envs (CartPole-v1 needs ~1.5M)"""
    learning_rate: float = 3e-4
    """Adam step size α of the policy (Spinning Up's pi_lr)"""
    vf_learning_rate: float = 1e-3
    """Adam step size of the critic (Spinning Up's vf_lr)"""
    vf_iters: int = 80
    """full-batch gradient steps on the critic per batch (Spinning Up's train_v_iters)"""
    num_envs: int = 4
    """N, environments stepped in parallel (one synchronous vector env)"""
    num_steps: int = 1000
    """T, steps per environment in each batch; batch size = N·T (Spinning Up: 4000 per epoch)"""
    gamma: float = 0.99
    """discount factor γ in [0, 1]"""
    gae_lambda: float = 0.97
    """GAE λ in [0, 1]: 0 gives one-step TD errors, 1 Monte-Carlo returns minus V"""


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
    # Orthogonal weights scaled by `std`, zero biases, as in the PPO scripts: √2 for tanh hidden
    # layers; 0.01 for the policy head, so the first policy is close to uniform (or zero-mean);
    # 1 for V.
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
    """Actor π_θ(a|s) and critic V_φ(s), each a tanh MLP with two hidden layers of --hidden-size
    units (64 by default). The actor's output is the logits of a Categorical (Discrete actions)
    or the mean of a diagonal Gaussian (Box actions), whose log-std is a learned vector that
    does not depend on the state."""

    def __init__(self, obs_dim: int, act_dim: int, continuous: bool, hidden_size: int = 64):
        super().__init__()
        self.continuous = continuous
        self.critic = mlp(obs_dim, hidden_size, 1, out_std=1.0)
        self.actor = mlp(obs_dim, hidden_size, act_dim, out_std=0.01)
        if continuous:
            # log σ = −0.5 (σ ≈ 0.61) at the start, as in Spinning Up. ppo_continuous.py starts
            # at CleanRL's σ = 1 instead: each script keeps the value of the code whose published
            # results it is compared with. With σ ≈ 0.61 about a tenth of the first actions fall
            # outside MuJoCo's [−1, 1] (with σ = 1, a third) and reach the env clipped.
            self.actor_logstd = nn.Parameter(torch.full((act_dim,), -0.5))

    def get_value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.critic(obs).squeeze(-1)  # (B, 1) -> (B,): one value per observation

    def get_action_and_value(self, obs: torch.Tensor, action: torch.Tensor | None = None):
        """obs (B, obs_dim) -> action (B,) or (B, act_dim), log π(a|s), entropy, V(s), each (B,).
        Samples an action unless one is given (the update re-evaluates stored actions)."""
        # Both distributions written out, so that their formulas are on the page (tests check that
        # they give torch.distributions' numbers bit for bit, which is why log σ is computed as
        # log(σ), as the library does).
        if self.continuous:
            mean = self.actor(obs)  # μ_θ(s), (B, act_dim)
            std = self.actor_logstd.exp().expand_as(mean)  # σ, the same in every state
            if action is None:
                action = torch.normal(mean, std)
            # The action dimensions are independent, so the density is a product: log-probs add
            # up over the last axis, and so do the entropies.
            # math: \log\pi_\theta(a|s) = \sum_j \log\mathcal{N}(a_j; \mu_{\theta,j}(s), \sigma_j^2)
            # math: \log\mathcal{N}(a) = -\frac{(a-\mu)^2}{2\sigma^2} - \log\sigma - \log\sqrt{2\pi}
            log_density = (-((action - mean) ** 2) / (2 * std**2) - std.log()
                           - math.log(math.sqrt(2 * math.pi)))  # (B, act_dim)
            logprob = log_density.sum(-1)
            # math: H[\pi_\theta(\cdot|s)] = \sum_j (\tfrac12 + \tfrac12 \log 2\pi + \log \sigma_j)
            entropy = (0.5 + 0.5 * math.log(2 * math.pi) + std.log()).sum(-1)
        else:
            # The actor's outputs z are logits: π_θ(a|s) is the softmax of z.
            # math: \log \pi_\theta(a|s) = z_a - \log \textstyle\sum_b e^{z_b}
            logits = self.actor(obs)
            log_pi = logits - logits.logsumexp(-1, keepdim=True)  # log π(·|s), (B, n_actions)
            if action is None:
                action = torch.multinomial(log_pi.softmax(-1), 1, replacement=True).squeeze(-1)
            logprob = log_pi.gather(-1, action[:, None]).squeeze(-1)  # log π(a|s) of the action
            # math: H[\pi_\theta(\cdot|s)] = -\textstyle\sum_a \pi_\theta(a|s) \log \pi_\theta(a|s)
            entropy = -(log_pi * log_pi.softmax(-1)).sum(-1)
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
    (T, N), with returns = A + V; with λ = 1 they are the discounted rewards-to-go.
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


def vpg_loss(logprob, advantages):
    """The policy-gradient surrogate on a batch of B steps, as a loss to minimise. Inputs have
    shape (B,).

    Its gradient is ∇L = −ĝ, minus the policy-gradient estimate averaged over the B steps of the
    batch (Schulman et al. 2016, eq. 1 with Ψ_t = Â_t). Its value is no measure of how well the
    policy performs: judge a run by its returns.
    """
    # math: \hat g = \frac{1}{B}\sum_{t} \nabla_\theta \log \pi_\theta(a_t|s_t)\, \hat A_t
    # math: L^{PG}(\theta) = -\frac{1}{B}\sum_{t} \log \pi_\theta(a_t|s_t)\, \hat A_t
    return -(logprob * advantages).mean()


def value_loss(value, returns):
    """Mean squared error of the critic against its targets R̂_t; inputs have shape (B,)."""
    # math: L^{V}(\phi) = \frac{1}{B}\sum_t \big(V_\phi(s_t) - \hat R_t\big)^2
    return ((value - returns) ** 2).mean()


def train(args: Args) -> dict:
    """Train with VPG; return a summary dict (run_dir, episodic returns, eval returns, ...)."""
    check_args(args)
    batch_size = args.num_envs * args.num_steps
    num_iterations = args.total_timesteps // batch_size
    # The env id without the module of module:EnvId (Windows forbids a colon in a folder name).
    run_name = f"{args.env_id.rpartition(':')[2]}__{args.exp_name}__{args.seed}__{int(time.time())}"
    run_dir = os.path.join(args.log_dir, run_name)
    writer = SummaryWriter(run_dir)
    table = "\n".join(f"|{k}|{v}|" for k, v in asdict(args).items())
    writer.add_text("hyperparameters", "|param|value|\n|-|-|\n" + table)

    # --- seeding: Python, NumPy, torch (action sampling) and the envs ---
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.num_threads)  # the thread count changes float summation order
    device = torch.device("cuda" if args.cuda else "cpu")

    envs = make_vec_env(args.env_id, args.num_envs)
    obs_dim, action_space = envs.single_observation_space.shape[0], envs.single_action_space
    # The one place where the action space decides the policy head: Gaussian for Box, else
    # Categorical.
    continuous = isinstance(action_space, gym.spaces.Box)
    act_dim = action_space.shape[0] if continuous else int(action_space.n)
    agent = Agent(obs_dim, act_dim, continuous, args.hidden_size).to(device)
    # Two optimisers, as in Spinning Up: the actor and the critic have their own step sizes and
    # step counts. Adam's ε = 1e-5 as in the PPO scripts; the fused kernel is fastest on a CPU.
    policy_params = [p for name, p in agent.named_parameters() if not name.startswith("critic")]
    pi_optimizer = torch.optim.Adam(policy_params, lr=args.learning_rate, eps=1e-5, fused=True)
    vf_optimizer = torch.optim.Adam(agent.critic.parameters(), lr=args.vf_learning_rate, eps=1e-5,
                                    fused=True)

    # --- rollout storage, time-major: (T, N, ...) ---
    shape = (args.num_steps, args.num_envs)  # (T, N)
    obs = torch.zeros((*shape, obs_dim), device=device)
    action_shape, action_dtype = ((act_dim,), torch.float32) if continuous else ((), torch.long)
    actions = torch.zeros((*shape, *action_shape), dtype=action_dtype, device=device)
    values = torch.zeros(shape, device=device)
    final_values = torch.zeros(shape, device=device)  # V(final obs) where the episode was truncated
    # What the env returns stays in NumPy during the rollout, where a tensor per step would cost
    # more than the arithmetic; it becomes tensors once, before GAE.
    rewards_np, terminations_np, truncations_np = (np.zeros(shape) for _ in range(3))

    global_step, start_time, last_print = 0, time.time(), 0.0
    episode_return, episode_length = np.zeros(args.num_envs), np.zeros(args.num_envs, dtype=int)
    episodic_returns, recent_returns = [], deque(maxlen=20)
    next_obs_np, _ = envs.reset(seed=args.seed)  # env i is seeded with seed + i
    next_obs = torch.as_tensor(next_obs_np, dtype=torch.float32, device=device)
    stop = stop_on_ctrl_c()  # a Ctrl-C ends the loop after the current update (see below `train`)
    guard = Guard(args, run_dir, writer, agent)  # stops the run on NaN or inf (see below `train`)
    for iteration in range(1, num_iterations + 1):
        # --- rollout: T steps in each of the N envs with the current policy π_θ ---
        # Collecting needs no gradient: the update recomputes log π and V. Inference mode also
        # skips the version counters and view tracking that autograd keeps under no_grad.
        with torch.inference_mode():
            for step in range(args.num_steps):
                global_step += args.num_envs
                obs[step] = next_obs
                action, _, _, value = agent.get_action_and_value(next_obs)
                actions[step], values[step] = action, value
                # A Gaussian sample can leave the action bounds: the env gets it clipped, the batch
                # keeps the sample itself, whose log-probability is the one the gradient needs.
                env_action = action.cpu().numpy()
                if continuous:
                    env_action = np.clip(env_action, action_space.low, action_space.high)
                next_obs_np, reward, terminated, truncated, infos = envs.step(env_action)
                guard.check_env(next_obs_np, reward, infos, global_step)
                rewards_np[step] = reward
                terminations_np[step], truncations_np[step] = terminated, truncated
                next_obs = torch.as_tensor(next_obs_np, dtype=torch.float32, device=device)
                if truncated.any():  # bootstrap a cut episode with V of its real final observation
                    idx = np.flatnonzero(truncated)
                    final_obs_np = np.stack(infos["final_obs"][idx])
                    final_obs = torch.as_tensor(final_obs_np, dtype=torch.float32, device=device)
                    final_values[step, idx] = agent.get_value(final_obs)
                episode_return += reward
                episode_length += 1
                for i in np.flatnonzero(terminated | truncated):
                    writer.add_scalar("charts/episodic_return", episode_return[i], global_step)
                    writer.add_scalar("charts/episodic_length", episode_length[i], global_step)
                    episodic_returns.append((global_step, float(episode_return[i])))
                    recent_returns.append(episode_return[i])
                    episode_return[i], episode_length[i] = 0.0, 0

        # --- bootstrap and advantages ---
        rewards, terminations, truncations = (
            torch.as_tensor(x, dtype=torch.float32, device=device)  # (T, N)
            for x in (rewards_np, terminations_np, truncations_np))
        with torch.no_grad():
            next_value = agent.get_value(next_obs)  # V(s_T), (N,): for paths cut by the batch end
        # V(s_{t+1}) of every step: the next stored value, or V(final obs) where the episode was
        # truncated. After a termination it is the reset observation's value, masked in GAE.
        next_values = torch.cat([values[1:], next_value[None]])
        next_values = torch.where(truncations.bool(), final_values, next_values)
        advantages, _ = compute_gae(rewards, values, next_values, terminations, truncations,
                                    args.gamma, args.gae_lambda)
        # The critic regresses on the discounted rewards-to-go, bootstrapped the same way (as in
        # Spinning Up): GAE's returns with λ = 1. With k the number of steps from t to the end of
        # the episode or of the batch, whichever comes first, V(s_{t+k}) is V(final observation)
        # after a truncation, V(s_T) at the batch's end, and 0 after a termination:
        # math: \hat R_t = \sum_{l=0}^{k-1} \gamma^l r_{t+l} + \gamma^k V(s_{t+k})
        _, returns = compute_gae(rewards, values, next_values, terminations, truncations,
                                 args.gamma, 1.0)

        # --- flatten the batch: (T, N, ...) -> (T·N, ...) ---
        b_obs, b_actions = obs.reshape(-1, obs_dim), actions.reshape(-1, *action_shape)
        b_values, b_returns = values.reshape(-1), returns.reshape(-1)
        b_advantages = advantages.reshape(-1)
        # Normalised over the batch, as in Spinning Up. Dividing by the std only rescales the step,
        # so that its size does not depend on the scale of the rewards; subtracting the mean is a
        # baseline: it changes this batch's estimate, its direction too, but not its expectation,
        # since E[∇ log π] = 0 (apart from the small bias of taking the mean from the same batch).
        b_advantages = (b_advantages - b_advantages.mean()) / (b_advantages.std() + 1e-8)

        # --- update: one policy-gradient step on θ, then vf_iters critic steps on φ ---
        _, logprob, entropy, _ = agent.get_action_and_value(b_obs, b_actions)
        pg_loss = vpg_loss(logprob, b_advantages)
        pi_optimizer.zero_grad()
        pg_loss.backward()
        pi_optimizer.step()
        v_losses = []
        for _ in range(args.vf_iters):
            v_loss = value_loss(agent.get_value(b_obs), b_returns)
            vf_optimizer.zero_grad()
            v_loss.backward()
            vf_optimizer.step()
            v_losses.append(v_loss.detach())
        # How far the one step moved the policy: the k3 estimate of KL[π_old ‖ π_θ], with
        # r = π_θ / π_old (J. Schulman, "Approximating KL divergence", 2020).
        # math: k_3 = \mathbb{E}_t[(r_t - 1) - \log r_t]
        with torch.no_grad():
            _, new_logprob, _, _ = agent.get_action_and_value(b_obs, b_actions)
            logratio = new_logprob - logprob.detach()
            approx_kl = ((logratio.exp() - 1) - logratio).mean()

        # --- log: the value loss is the mean over the critic steps of this update ---
        losses = {"policy_loss": pg_loss.item(), "value_loss": torch.stack(v_losses).mean().item(),
                  "entropy": entropy.mean().item(), "approx_kl": approx_kl.item()}
        guard.check_update(losses, iteration, global_step)
        for key, value in losses.items():
            writer.add_scalar(f"losses/{key}", value, global_step)
        # Explained variance 1 − Var[R − V]/Var[R]: 1 is a perfect critic, ≤ 0 a useless one.
        errors_var, returns_var = (b_returns - b_values).var(), b_returns.var()
        explained_var = (1 - errors_var / returns_var).item() if returns_var > 0 else np.nan
        writer.add_scalar("losses/explained_variance", explained_var, global_step)
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
    return finish(args, run_dir, writer, agent, global_step, episodic_returns, bool(stop))


# --- tooling: input checks, evaluation, checkpoints, Ctrl-C, guard rails, the command line ---
# Nothing below is part of the learning algorithm: a first reading can stop here.


def fail(message: str):
    """Stop with a one-line error (exit code 1)."""
    raise SystemExit(f"vpg.py: error: {message}")


def check_args(args: Args) -> None:
    """Reject a bad setup with a one-line message, before anything is built or trained."""
    if tuple(int(part) for part in gym.__version__.split(".")[:2]) < (1, 1):  # AutoresetMode
        fail(f"needs gymnasium 1.1 or newer, found {gym.__version__}: pip install -U gymnasium")
    if args.cuda and not torch.cuda.is_available():
        fail("--cuda: torch finds no usable GPU; leave out --cuda to train on the CPU")
    integers = {"--total-timesteps": args.total_timesteps, "--num-envs": args.num_envs,
                "--num-steps": args.num_steps, "--vf-iters": args.vf_iters,
                "--num-threads": args.num_threads}
    for flag, value in integers.items():
        if value < 1:
            fail(f"{flag} must be a positive integer, got {value}")
    rates = {"--learning-rate": args.learning_rate, "--vf-learning-rate": args.vf_learning_rate}
    for flag, value in rates.items():
        if value <= 0:
            fail(f"{flag} must be positive, got {value}")
    for flag, value in {"--gamma": args.gamma, "--gae-lambda": args.gae_lambda}.items():
        if not 0 <= value <= 1:
            fail(f"{flag} must lie in [0, 1], got {value}")
    if args.eval_episodes < 0:
        fail("--eval-episodes must be >= 0")
    batch_size = args.num_envs * args.num_steps
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
    flat_box = isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1
    if not (isinstance(action_space, gym.spaces.Discrete) or flat_box):
        fail(f"{args.env_id} has a {type(action_space).__name__} action space; "
             "vpg.py supports Discrete and flat Box")
    if isinstance(action_space, gym.spaces.Discrete) and action_space.start != 0:
        start, n = int(action_space.start), int(action_space.n)
        fail(f"{args.env_id} numbers its actions from {start}, the policy from 0: in make_env, "
             f"wrap the env in gym.wrappers.TransformAction(env, lambda a: a + {start}, "
             f"gym.spaces.Discrete({n}))")
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


def evaluate(agent: Agent, env_id: str, args: Args, seed: int, folder: str) -> list[float]:
    """Play --eval-episodes episodes on the CPU with the most likely action (Discrete) or the mean
    action (Box), filmed into <folder>/videos with --capture-video; print and return their
    returns. The seed of the first reset fixes the whole sequence of episodes. An env without a
    time limit gets one of 10,000 steps, so that no episode runs for ever."""
    env = make_env(env_id, render_mode="rgb_array") if args.capture_video else make_env(env_id)
    if env.spec is None or env.spec.max_episode_steps is None:  # never an endless episode
        env = gym.wrappers.TimeLimit(env, 10_000)
    if args.capture_video:
        env = gym.wrappers.RecordVideo(env, os.path.join(folder, "videos"), lambda _: True,
                                       disable_logger=True)
    agent, returns = agent.cpu(), []
    for episode in range(args.eval_episodes):
        obs, _ = env.reset(seed=seed if episode == 0 else None)
        episode_return, done = 0.0, False
        while not done:
            with torch.no_grad():
                out = agent.actor(torch.as_tensor(obs, dtype=torch.float32)).numpy()
            if agent.continuous:
                action = np.clip(out, env.action_space.low, env.action_space.high)
            else:
                action = int(out.argmax())
            obs, reward, terminated, truncated, _ = env.step(action)
            episode_return += float(reward)
            done = terminated or truncated
        returns.append(episode_return)
    env.close()
    print(f"{env_id}: mean return {np.mean(returns):.2f} ± {np.std(returns):.2f} over "
          f"{len(returns)} deterministic episodes (seed {seed})")
    return returns


def load_checkpoint(path: str) -> tuple[Agent, dict]:
    checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    hidden_size = checkpoint["args"].get("hidden_size", 64)  # saved before the flag existed: 64
    agent = Agent(checkpoint["obs_dim"], checkpoint["act_dim"], checkpoint["continuous"],
                  hidden_size)
    try:
        agent.load_state_dict(checkpoint["model"])
    except RuntimeError as error:  # `Agent` was edited since: other layers or other shapes
        fail(f"{path} does not fit the networks this file defines "
             f"({str(error).splitlines()[-1].strip()}); evaluate it with the script that saved it")
    return agent, checkpoint


def save_checkpoint(args: Args, run_dir: str, agent: Agent, global_step: int) -> str:
    path = os.path.join(run_dir, "model.pt")
    # Only tensors, numbers and strings, so `torch.load(path, weights_only=True)` reads it.
    torch.save({"model": agent.state_dict(), "args": asdict(args), "global_step": global_step,
                "env_id": importable_env_id(args.env_id),  # as --eval-checkpoint makes the env
                "obs_dim": agent.actor[0].in_features, "act_dim": agent.actor[-1].out_features,
                "continuous": agent.continuous}, path + ".tmp")
    os.replace(path + ".tmp", path)  # all or nothing: a Ctrl-C mid-write leaves no half file
    print(f"model saved to {path}")
    return path


def finish(args: Args, run_dir: str, writer, agent: Agent, global_step: int, episodic_returns,
           interrupted: bool) -> dict:
    """After training, or after a Ctrl-C: save the model, evaluate it (unless interrupted), close
    the logs; return a summary of the run."""
    eval_returns, when = [], f"at step {global_step:,}"
    signal.signal(signal.SIGINT, signal.default_int_handler)  # Ctrl-C raises KeyboardInterrupt
    try:  # a Ctrl-C while saving or evaluating ends that, and the logs are still flushed below
        if args.save_model:
            save_checkpoint(args, run_dir, agent, global_step)
        if args.eval_episodes > 0 and not interrupted:
            # By default seeds the training envs never used, so the evaluation starts from
            # unseen initial states; `main` uses the same seed for --eval-checkpoint.
            seed = args.seed + 10_000 if args.eval_seed is None else args.eval_seed
            eval_returns = evaluate(agent, args.env_id, args, seed, run_dir)
    except KeyboardInterrupt:
        interrupted, when = True, "after training, while saving or evaluating"
    for i, r in enumerate(eval_returns):
        writer.add_scalar("eval/episodic_return", r, i)
    writer.close()
    if interrupted:
        print(f"interrupted {when}; logs flushed to {run_dir}", file=sys.stderr)
        raise SystemExit(130)  # the shell's code for "stopped by Ctrl-C"
    return {"run_dir": run_dir, "global_step": global_step, "episodic_returns": episodic_returns,
            "eval_returns": eval_returns, "agent": agent}


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

    def __init__(self, args: Args, run_dir: str, writer: SummaryWriter, agent: Agent):
        self.args, self.run_dir, self.writer, self.agent = args, run_dir, writer, agent
        self.last_finite, self.warned = nn.utils.parameters_to_vector(agent.parameters()), False
        self.last_end, self.warned_endless = 0, False  # the step of the last episode's end

    def check_env(self, obs: np.ndarray, reward: np.ndarray, infos: dict, global_step: int):
        if "final_obs" in infos:  # an episode ended (SAME_STEP autoreset, see `make_vec_env`)
            self.last_end = global_step
        elif global_step - self.last_end >= self.endless and not self.warned_endless:
            self.warned_endless = True
            print(f"vpg.py: warning: no episode has ended in {self.endless:,} steps; if "
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
            print(f"vpg.py: warning: update {iteration} moved the policy far from the one "
                  f"that collected the data (approx-KL {losses['approx_kl']:.3g}, where 0.01 to "
                  "0.05 is usual); the learning rate is probably too large", file=sys.stderr)

    def stop(self, message: str, global_step: int, saved: str):
        """Flush the logs, save the (finite) model with --save-model, exit with code 1."""
        signal.signal(signal.SIGINT, signal.default_int_handler)
        if self.args.save_model:
            path = save_checkpoint(self.args, self.run_dir, self.agent, global_step)
            message += f"; {saved} saved in {path}"
        self.writer.close()
        raise SystemExit(f"vpg.py: error: {message}")


def main(args: Args) -> None:
    """Train, or with --eval-checkpoint evaluate a saved policy on the env it was trained on."""
    if args.eval_checkpoint is None:
        train(args)
        return
    check_args(args)
    agent, checkpoint = load_checkpoint(args.eval_checkpoint)
    # The id with the module that registers the env; a checkpoint saved before that has none.
    env_id = checkpoint.get("env_id", checkpoint["args"]["env_id"])
    make_env_or_fail(env_id, f"saved in {args.eval_checkpoint}").close()
    # The seed of the evaluation after training, so that the same model gives the same numbers.
    seed = checkpoint["args"]["seed"] + 10_000 if args.eval_seed is None else args.eval_seed
    evaluate(agent, env_id, args, seed, os.path.dirname(args.eval_checkpoint))


if __name__ == "__main__":
    try:
        main(tyro.cli(Args))
    except KeyboardInterrupt:  # Ctrl-C outside the training loop, or a second one inside it
        raise SystemExit(130) from None
