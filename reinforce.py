"""REINFORCE: the Monte-Carlo policy gradient, no critic, in one file.

Williams (1992), "Simple statistical gradient-following algorithms for connectionist
reinforcement learning", with rewards-to-go as the return weights (Sutton & Barto 2018, §13.3).
For Gymnasium environments with `Discrete` actions (CartPole-v1, LunarLander-v3) or `Box`
actions (Pendulum-v1, HalfCheetah-v4).

    python reinforce.py                                     # CartPole-v1, 500k steps
    python reinforce.py --help                              # every flag, with its meaning
    python reinforce.py --save-model                        # writes runs/<run>/model.pt
    python reinforce.py --eval-checkpoint runs/<run>/model.pt --capture-video
    tensorboard --logdir runs

The first file of the reading order reinforce.py → vpg.py → ppo_discrete.py →
ppo_continuous.py. Each batch is a set of complete episodes played by the current policy, and
the policy takes one Adam step on it. Nothing here estimates a value, so nothing can stand in
for the rewards after a cut: only complete episodes are used. Lines starting with `# math:`
hold the LaTeX of the equation the code below computes. The training algorithm ends with
`train`; the tooling after it (input checks, evaluation, checkpoints) can be skipped on a first
reading.
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
    exp_name: str = "reinforce"
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
    """units in each of the two tanh hidden layers of the policy network"""
    total_timesteps: int = 500_000
    """environment steps to train for, summed over all envs"""
    learning_rate: float = 3e-3
    """Adam step size α of the policy; typical 1e-4 to 1e-2"""
    num_envs: int = 4
    """N, environments stepped in parallel (one synchronous vector env)"""
    batch_size: int = 5000
    """each batch holds complete episodes, at least this many steps in all"""
    gamma: float = 0.99
    """discount factor γ in [0, 1]"""
    norm_returns: bool = False
    """normalise the batch's returns G_t to mean 0, std 1: a baseline and a rescaling"""



def make_env(env_id: str, **kwargs) -> gym.Env:
    """The one place where an environment is made: training, evaluation and the input checks
    all call it, so keyword arguments for your env, or a wrapper, added here apply everywhere
    (README, "Your own environment"). Evaluation passes render_mode for videos."""
    return gym.make(env_id, **kwargs)


def make_vec_env(env_id: str, num_envs: int) -> gym.vector.VectorEnv:
    # Gymnasium 1.x resets a finished sub-environment automatically. We choose the SAME_STEP mode:
    # the step that ends an episode already returns the first observation of the next one, so no
    # action is spent on a reset and every step in the batch is a real transition.
    return gym.vector.SyncVectorEnv([lambda: make_env(env_id) for _ in range(num_envs)],
                                    autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)


def layer_init(layer: nn.Linear, std: float = np.sqrt(2)) -> nn.Linear:
    # Orthogonal weights scaled by `std`, zero biases, as in the PPO scripts: √2 for tanh hidden
    # layers; 0.01 for the policy head, so the first policy is close to uniform (or zero-mean).
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
    """The policy π_θ(a|s), a tanh MLP with two hidden layers of --hidden-size units (64 by
    default), and nothing else. Its output is the logits of a Categorical (Discrete actions) or
    the mean of a diagonal Gaussian (Box actions), whose log-std is a learned vector that does
    not depend on the state."""

    def __init__(self, obs_dim: int, act_dim: int, continuous: bool, hidden_size: int = 64):
        super().__init__()
        self.continuous = continuous
        self.actor = mlp(obs_dim, hidden_size, act_dim, out_std=0.01)
        if continuous:
            # log σ = −0.5 (σ ≈ 0.61) at the start, as in vpg.py. ppo_continuous.py starts
            # at CleanRL's σ = 1 instead: each script keeps the value of the code whose published
            # results it is compared with. With σ ≈ 0.61 about a tenth of the first actions fall
            # outside MuJoCo's [−1, 1] (with σ = 1, a third) and reach the env clipped.
            self.actor_logstd = nn.Parameter(torch.full((act_dim,), -0.5))

    def get_action(self, obs: torch.Tensor, action: torch.Tensor | None = None):
        """obs (B, obs_dim) -> action (B,) or (B, act_dim), log π(a|s) (B,), entropy (B,).
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
        return action, logprob, entropy


def compute_returns(rewards, dones, gamma: float):
    """Discounted rewards-to-go over a batch of complete episodes laid end to end.

    rewards and dones have shape (B,); dones[t] = 1 at the last step of each episode, so the
    batch ends with a 1. The sum stops at the episode's end and never crosses into the next:

        G_t = r_t + γ (1 − done_t) G_{t+1}   =   Σ_{l ≥ 0, within the episode} γ^l r_{t+l}

    Only rewards from t on appear: an action cannot change the rewards that came before it, so
    dropping them leaves the gradient's expectation unchanged and lowers its variance.
    """
    returns = torch.zeros_like(rewards)
    next_return = torch.zeros(())  # G_{t+1}
    for t in reversed(range(rewards.shape[0])):
        next_return = rewards[t] + gamma * (1.0 - dones[t]) * next_return
        returns[t] = next_return
    return returns


def reinforce_loss(logprob, returns):
    """The REINFORCE surrogate on a batch, as a loss to minimise. Inputs have shape (B,).

    Its gradient is minus the policy-gradient estimate, rescaled (Williams 1992): descending it
    raises the log-probability of each action in proportion to the return that followed. Its
    value is no measure of how well the policy performs: judge a run by its returns.
    """
    # The estimate ĝ of ∇J from the batch's episodes τ ∈ D (Williams 1992, rewards-to-go form):
    # math: \hat g = \frac{1}{|D|} \sum_\tau \sum_t \nabla_\theta \log \pi_\theta(a_t|s_t)\, G_t
    # The loss averages over the B steps instead of the |D| episodes: that rescales each batch's
    # gradient by |D|/B > 0, which leaves its direction alone and which Adam's normalised steps
    # barely feel.
    # math: L(\theta) = -\frac{1}{B}\sum_t \log \pi_\theta(a_t|s_t)\, G_t
    # math: -\nabla_\theta L = \frac{|D|}{B}\, \hat g
    return -(logprob * returns).mean()


def train(args: Args) -> dict:
    """Train with REINFORCE; return a summary (run_dir, episodic returns, eval returns, ...)."""
    check_args(args)
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
    # Adam's ε = 1e-5 as in the PPO scripts; the fused kernel is the fastest Adam on a CPU.
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5, fused=True)

    global_step, start_time, last_print, iteration = 0, time.time(), 0.0, 0
    episodic_returns, recent_returns = [], deque(maxlen=20)
    stop = stop_on_ctrl_c()  # a Ctrl-C ends the loop after the current update (see below `train`)
    guard = Guard(args, run_dir, writer, agent)  # stops the run on NaN or inf (see below `train`)
    while global_step < args.total_timesteps:
        iteration += 1
        # --- rollout: complete episodes of the current policy π_θ, at least batch_size steps ---
        # Every batch starts fresh episodes: one still running from the last batch was begun
        # by an older policy. Once the batch is full, no env starts a new episode for it, but
        # every episode already begun is played to its end: keeping only those that finish
        # first would favour short episodes. A time-limit truncation (CartPole's 500 steps)
        # is taken as the episode's end: with no critic there is nothing to bootstrap the
        # missing rewards with, so G_t near the limit lacks the rewards that would have followed
        # (Pardo et al. 2018).
        # The first reset seeds env i with seed + i; later resets continue those random streams.
        next_obs_np, _ = envs.reset(seed=args.seed if iteration == 1 else None)
        next_obs = torch.as_tensor(next_obs_np, dtype=torch.float32, device=device)
        iteration_start = global_step
        episode_obs, episode_actions, episode_rewards = ([[] for _ in range(args.num_envs)]
                                                         for _ in range(3))
        b_obs, b_actions, b_rewards, b_dones = [], [], [], []  # a step each, episode after episode
        collecting = np.ones(args.num_envs, dtype=bool)  # env i's episode goes into the batch
        # Collecting needs no gradient: the update recomputes log π. Inference mode also skips
        # the version counters and view tracking that autograd keeps under no_grad.
        with torch.inference_mode():
            while collecting.any():
                global_step += args.num_envs
                action, _, _ = agent.get_action(next_obs)
                # A Gaussian sample can leave the action bounds: the env gets it clipped, the batch
                # keeps the sample itself, whose log-probability is the one the gradient needs.
                env_action = action.cpu().numpy()
                if continuous:
                    env_action = np.clip(env_action, action_space.low, action_space.high)
                next_obs_np, reward, terminated, truncated, infos = envs.step(env_action)
                guard.check_env(next_obs_np, reward, infos, global_step)
                for i in np.flatnonzero(collecting):
                    episode_obs[i].append(next_obs[i])
                    episode_actions[i].append(action[i])
                    episode_rewards[i].append(float(reward[i]))
                next_obs = torch.as_tensor(next_obs_np, dtype=torch.float32, device=device)
                for i in np.flatnonzero((terminated | truncated) & collecting):
                    length, episode_return = len(episode_rewards[i]), sum(episode_rewards[i])
                    writer.add_scalar("charts/episodic_return", episode_return, global_step)
                    writer.add_scalar("charts/episodic_length", length, global_step)
                    episodic_returns.append((global_step, episode_return))
                    recent_returns.append(episode_return)
                    b_obs += episode_obs[i]
                    b_actions += episode_actions[i]
                    b_rewards += episode_rewards[i]
                    b_dones += [0.0] * (length - 1) + [1.0]
                    episode_obs[i], episode_actions[i], episode_rewards[i] = [], [], []
                    collecting[i] = len(b_rewards) < args.batch_size

        # --- returns: rewards-to-go G_t of each step, within its episode ---
        b_obs, b_actions = torch.stack(b_obs), torch.stack(b_actions)  # (B, obs_dim), (B, ...)
        b_returns = compute_returns(torch.tensor(b_rewards, device=device),
                                    torch.tensor(b_dones, device=device), args.gamma)
        if args.norm_returns:
            # The batch mean is a baseline: subtracting a constant leaves the expected gradient
            # unchanged, since E[∇ log π] = 0 (apart from the small bias of taking the mean from
            # the same batch); dividing by the std only rescales the step.
            b_returns = (b_returns - b_returns.mean()) / (b_returns.std() + 1e-8)

        # --- update: one policy-gradient step on θ ---
        _, logprob, entropy = agent.get_action(b_obs, b_actions)
        pg_loss = reinforce_loss(logprob, b_returns)
        optimizer.zero_grad()
        pg_loss.backward()
        optimizer.step()
        # How far the one step moved the policy: the k3 estimate of KL[π_old ‖ π_θ], with
        # r = π_θ / π_old (J. Schulman, "Approximating KL divergence", 2020).
        # math: k_3 = \mathbb{E}_t[(r_t - 1) - \log r_t]
        with torch.no_grad():
            _, new_logprob, _ = agent.get_action(b_obs, b_actions)
            logratio = new_logprob - logprob.detach()
            approx_kl = ((logratio.exp() - 1) - logratio).mean()

        # --- log ---
        losses = {"policy_loss": pg_loss.item(), "entropy": entropy.mean().item(),
                  "approx_kl": approx_kl.item()}
        guard.check_update(losses, iteration, global_step)
        for key, value in losses.items():
            writer.add_scalar(f"losses/{key}", value, global_step)
        # The share of the steps taken that entered the batch; the rest were spent by the other
        # envs while the last episodes of the batch ran to their end.
        batch_fraction = len(b_rewards) / (global_step - iteration_start)
        writer.add_scalar("charts/batch_fraction", batch_fraction, global_step)
        sps = global_step / (time.time() - start_time)
        writer.add_scalar("charts/SPS", sps, global_step)
        if time.time() - last_print > 5 or global_step >= args.total_timesteps:
            last_print = time.time()
            mean_return = f"{np.mean(recent_returns):8.2f}" if recent_returns else "     n/a"
            eta = int(max(args.total_timesteps - global_step, 0) / sps)
            print(f"step {global_step:>9,}/{args.total_timesteps:,} | return (last 20) "
                  f"{mean_return} | SPS {sps:6.0f} | ETA {eta // 60}m{eta % 60:02d}s", flush=True)
        if stop:
            break
    envs.close()
    return finish(args, run_dir, writer, agent, global_step, episodic_returns, bool(stop))


# --- tooling: input checks, evaluation, checkpoints, Ctrl-C, guard rails, the command line ---
# Nothing below is part of the learning algorithm: a first reading can stop here.


def fail(message: str):
    """Stop with a one-line error (exit code 1)."""
    raise SystemExit(f"reinforce.py: error: {message}")


def check_args(args: Args) -> None:
    """Reject a bad setup with a one-line message, before anything is built or trained."""
    if tuple(int(part) for part in gym.__version__.split(".")[:2]) < (1, 1):  # AutoresetMode
        fail(f"needs gymnasium 1.1 or newer, found {gym.__version__}: pip install -U gymnasium")
    if args.cuda and not torch.cuda.is_available():
        fail("--cuda: torch finds no usable GPU; leave out --cuda to train on the CPU")
    integers = {"--total-timesteps": args.total_timesteps, "--num-envs": args.num_envs,
                "--batch-size": args.batch_size, "--num-threads": args.num_threads}
    for flag, value in integers.items():
        if value < 1:
            fail(f"{flag} must be a positive integer, got {value}")
    if args.learning_rate <= 0:
        fail(f"--learning-rate must be positive, got {args.learning_rate}")
    if not 0 <= args.gamma <= 1:
        fail(f"--gamma must lie in [0, 1], got {args.gamma}")
    if args.eval_episodes < 0:
        fail("--eval-episodes must be >= 0")
    batch_size = args.batch_size
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
             "reinforce.py supports Discrete and flat Box")
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
      without a time limit). Once the step budget is spent too, the run stops: a batch of
      REINFORCE waits for its episodes to end, so it would wait for ever.
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
            print(f"reinforce.py: warning: no episode has ended in {self.endless:,} steps; if "
                  f"{self.args.env_id} has no time limit, give it one, e.g. "
                  "gym.make(env_id, max_episode_steps=1000) in make_env", file=sys.stderr)
        elif self.warned_endless and global_step >= self.args.total_timesteps:
            self.stop(f"no episode of {self.args.env_id} has ended in the last "
                      f"{global_step - self.last_end:,} steps and --total-timesteps are spent; "
                      "REINFORCE learns from complete episodes only", global_step, "the model is")
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
            print(f"reinforce.py: warning: update {iteration} moved the policy far from the one "
                  f"that collected the data (approx-KL {losses['approx_kl']:.3g}, where 0.01 to "
                  "0.05 is usual); the learning rate is probably too large", file=sys.stderr)

    def stop(self, message: str, global_step: int, saved: str):
        """Flush the logs, save the (finite) model with --save-model, exit with code 1."""
        signal.signal(signal.SIGINT, signal.default_int_handler)
        if self.args.save_model:
            path = save_checkpoint(self.args, self.run_dir, self.agent, global_step)
            message += f"; {saved} saved in {path}"
        self.writer.close()
        raise SystemExit(f"reinforce.py: error: {message}")


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
