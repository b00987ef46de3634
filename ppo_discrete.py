"""Proximal policy optimisation (PPO-clip) with a learned value baseline and GAE-λ, in one file.

    PPO-clip, one iteration of `train`:
    1. Step the N envs T times with π_θ. Store obs, a, r and V(s) (`--- rollout ---`).
       Store log π_θ_old(a|s) too: π_θ is π_θ_old until the update.
    2. At a truncation, store V(final obs) to bootstrap the cut episode (`final_values`).
    3. Bootstrap the batch's end with V(s_T). Compute the GAE-λ advantages Â (`compute_gae`).
       The critic's targets are the λ-returns Â + V.
    4. For K epochs, or until an epoch's mean KL exceeds `--target-kl`, shuffle the batch into
       minibatches (`--- update ---`). On each, normalise Â, then take one Adam step on the loss
       (`ppo_loss`): the clipped surrogate (`surrogate`), the value loss and the entropy bonus.
    5. Log each loss as its mean over all the update's minibatches (`--- log ---`).

    python ppo_discrete.py                                  # CartPole-v1, 500k steps
    python ppo_discrete.py --help                           # every flag, with its meaning
    python ppo_discrete.py --save-model                     # (tooling) writes runs/<run>/model.pt
    python ppo_discrete.py --eval-checkpoint runs/<run>/model.pt --capture-video  # (tooling)
    tensorboard --logdir runs

What changes from ppo_1_clip.py: the details of PPO's reference code. They are not one idea but
several, as OpenAI's ppo2 and CleanRL's `ppo.py` have them (docs/trpo-to-ppo_discrete.html)."""

import functools
import random
import time
from dataclasses import asdict, dataclass

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import tyro
from torch.utils.tensorboard import SummaryWriter


# "core detail N", "continuous detail N": item N of Huang et al. 2022's lists of PPO's details.
@dataclass
class Args:
    # --- the algorithm ---
    env_id: str = "CartPole-v1"
    """Gymnasium env with Discrete actions; module:EnvId for an env of your own"""
    hidden_size: int = 64
    """units in each of the two tanh hidden layers of the actor and of the critic"""
    total_timesteps: int = 499_712
    """environment steps to train for, summed over all envs (whole batches: 976 of 512)"""
    learning_rate: float = 2.5e-4
    """Adam step size α of actor and critic; typical 1e-4 to 3e-3"""
    anneal_lr: bool = True
    """decay the step size linearly from α to α/I in the last of I iterations (core detail 4)"""
    update_epochs: int = 4
    """K, passes over each batch; typical 3 to 10"""
    num_minibatches: int = 4
    """minibatches per epoch; must divide the batch N·T"""
    clip_coef: float = 0.2
    """ε of the clipped surrogate objective; typical 0.1 to 0.3"""
    clip_vloss: bool = True
    """clip the value update to ±ε around the rollout's value prediction, as in PPO's own code"""
    ent_coef: float = 0.01
    """c₂ ≥ 0, weight of the entropy bonus"""
    vf_coef: float = 0.5
    """c₁ ≥ 0, weight of the value loss"""
    max_grad_norm: float = 0.5
    """the global L2 norm of the gradient is clipped to this value"""
    target_kl: float | None = None
    """stop an update's epochs once an epoch's mean approx-KL exceeds it; typical 0.01 to 0.05"""
    norm_adv: bool = True
    """normalise advantages to mean 0, std 1 within each minibatch"""
    num_envs: int = 4
    """N, environments stepped in parallel (one synchronous vector env)"""
    num_steps: int = 128
    """T, steps per environment in each batch; batch size = N·T"""
    gamma: float = 0.99
    """discount factor γ in [0, 1]"""
    gae_lambda: float = 0.95
    """GAE λ in [0, 1]: 0 gives one-step TD errors, 1 Monte-Carlo returns minus V"""
    bootstrap_truncation: bool = True
    """bootstrap a time-limit truncation with V(final obs); --no-… treats it as a termination"""

    # --- the run (a script's tooling, after `train`, adds its own flags: RunArgs) ---
    seed: int = 1
    """seed ≥ 0 of Python, NumPy, torch and the envs; the same seed and flags reproduce a CPU run"""
    num_threads: int = 1
    """torch CPU threads; one suits these small networks; a fixed count keeps runs reproducible"""
    cuda: bool = False
    """train on the GPU (an error if none is found); small networks often run as fast on a CPU"""


def make_env(env_id: str, **kwargs) -> gym.Env:
    """The one place where an environment is made: training, evaluation and the checks call it."""
    return gym.make(env_id, **kwargs)


def make_vec_env(env_id: str, num_envs: int) -> gym.vector.VectorEnv:
    # SAME_STEP autoreset: the step that ends an episode already returns the first observation of
    # the next one. The real last observation is in infos["final_obs"].
    envs = gym.vector.SyncVectorEnv([functools.partial(make_env, env_id)] * num_envs,
                                    autoreset_mode=gym.vector.AutoresetMode.SAME_STEP)
    return gym.wrappers.vector.RecordEpisodeStatistics(envs)


def layer_init(layer: nn.Linear, std: float = np.sqrt(2)) -> nn.Linear:
    # Orthogonal weights, zero biases (core detail 2). A 0.01 policy head starts π near uniform.
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
    """Actor π_θ(a|s) and critic V_φ(s). The actor's output is the logits of a Categorical."""

    def __init__(self, obs_dim: int, n_actions: int, hidden_size: int = 64):
        super().__init__()
        self.critic = mlp(obs_dim, hidden_size, 1, out_std=1.0)
        self.actor = mlp(obs_dim, hidden_size, n_actions, out_std=0.01)

    def get_value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.critic(obs).squeeze(-1)  # (B, 1) -> (B,): one value per observation

    def greedy_action(self, obs, memory=None):
        """The most likely action for an observation (obs_dim,), and no memory for the next call."""
        return int(self.actor(torch.as_tensor(obs, dtype=torch.float32)).argmax()), None

    def get_action_and_value(self, obs: torch.Tensor, action: torch.Tensor | None = None):
        """obs (B, obs_dim) -> action (B,), log π(a|s) (B,), entropy (B,), V(s) (B,)."""
        # The actor's outputs z are logits: π_θ(a|s) is the softmax of z.
        # math: \log \pi_\theta(a|s) = z_a - \log \textstyle\sum_b e^{z_b}
        logits = self.actor(obs)
        log_pi = logits - logits.logsumexp(-1, keepdim=True)  # log π(·|s), (B, n_actions)
        if action is None:  # Sampled, unless the update re-evaluates stored actions.
            action = torch.multinomial(log_pi.softmax(-1), 1, replacement=True).squeeze(-1)
        logprob = log_pi.gather(-1, action[:, None]).squeeze(-1)  # log π(a|s) of the taken action
        # math: H[\pi_\theta(\cdot|s)] = -\textstyle\sum_a \pi_\theta(a|s) \log \pi_\theta(a|s)
        entropy = -(log_pi * log_pi.softmax(-1)).sum(-1)
        return action, logprob, entropy, self.get_value(obs)


def compute_gae(rewards, values, next_values, terminations, truncations, gamma, gae_lambda):
    """Generalised advantage estimation (Schulman et al. 2016, eq. 16) over a rollout.
    All inputs have shape (T, N), time-major. next_values[t] = V(s_{t+1}) is the value of the
    observation that really followed step t. Returns (advantages, returns), both (T, N).

        δ_t = r_t + γ (1 − terminated_t) V(s_{t+1}) − V(s_t)
        A_t = δ_t + γ λ (1 − done_t) A_{t+1},    done_t = terminated_t or truncated_t,  A_T = 0"""
    # Every δ_t at once. Only the recursion over A needs a loop, run backwards in time.
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
    # A sample gives no gradient only where the clipped term is the smaller one. That is where
    # Â > 0 and r > 1 + ε, or Â < 0 and r < 1 − ε: the steps already moved it far enough its way.
    # math: L^{CLIP}(\theta) = \frac{1}{B}\sum_t \min(r_t \hat A_t,\ \bar r_t \hat A_t)
    # math: \bar r_t = \mathrm{clip}(r_t(\theta),\ 1 - \epsilon,\ 1 + \epsilon)
    clipped_ratio = torch.clamp(ratio, 1 - clip_coef, 1 + clip_coef)
    return torch.min(ratio * advantages, clipped_ratio * advantages).mean()


def ppo_loss(new_logprob, old_logprob, advantages, new_value, old_value, returns, entropy,
             clip_coef: float, clip_vloss: bool, ent_coef: float, vf_coef: float):
    """The PPO loss to minimise (Schulman et al. 2017, eq. 9), and stats that carry no gradient."""
    # math: r_t(\theta) = \pi_\theta(a_t|s_t) / \pi_{\theta_{old}}(a_t|s_t)
    logratio = new_logprob - old_logprob
    ratio = logratio.exp()  # r_t(θ). It is 1, up to rounding, in the first minibatch of epoch 1
    pg_loss = -surrogate(ratio, advantages, clip_coef)
    # Value loss, with ppo2's clip of V's change around V_old (core detail 9).
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
        # clipfrac is the share of samples with |r − 1| > ε. Some of them still give a gradient.
        stats = {key: value.detach() for key, value in {  # For the log only.
            "policy_loss": pg_loss, "value_loss": v_loss, "entropy": entropy_loss,
            "old_approx_kl": (-logratio).mean(), "approx_kl": ((ratio - 1) - logratio).mean(),
            "clipfrac": ((ratio - 1.0).abs() > clip_coef).float().mean(),
        }.items()}
    return loss, stats


def train(args: Args, writer: SummaryWriter | None = None, hook=None) -> dict:
    """Train with PPO, log to TensorBoard, and return the loop's `state()` at the end."""
    batch_size = args.num_envs * args.num_steps
    minibatch_size = batch_size // args.num_minibatches
    num_iterations = args.total_timesteps // batch_size
    # --- seeding: Python, NumPy, torch (action sampling, minibatch order) and the envs ---
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.set_num_threads(args.num_threads)  # The thread count changes float summation order.
    device = torch.device("cuda" if args.cuda else "cpu")

    envs = make_vec_env(args.env_id, args.num_envs)
    obs_dim, action_space = envs.single_observation_space.shape[0], envs.single_action_space
    agent = Agent(obs_dim, int(action_space.n), args.hidden_size).to(device)
    # One optimiser for the actor and the critic. Adam's ε is 1e-5, not 1e-8 (core detail 3).
    optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5, fused=True)

    # --- rollout storage, time-major: (T, N, ...) ---
    shape = (args.num_steps, args.num_envs)  # (T, N)
    obs_np = np.zeros((*shape, obs_dim), dtype=np.float32)
    actions_np = np.zeros(shape, dtype=np.int64)
    logprobs_np, values_np, final_values_np, rewards_np, terminations_np, truncations_np = (
        np.zeros(shape, dtype=np.float32) for _ in range(6))

    writer = writer or SummaryWriter()  # torch's runs/<month><day>_<time>_<host>, or the tooling's
    table = "\n".join(f"|{k}|{v}|" for k, v in asdict(args).items())
    writer.add_text("hyperparameters", "|param|value|\n|-|-|\n" + table)
    global_step, episodic_returns, next_obs_np = 0, [], None  # Episodic: (step, return) pairs.

    # Everything the loop needs to go on from the end of an update, by name. Add here and below
    # any state you add to the loop, such as a target network or a schedule's counter.
    def state() -> dict:
        return {"agent": agent, "optimizer": optimizer,
                "envs": envs, "next_obs": next_obs_np, "global_step": global_step,
                "episodic_returns": episodic_returns, "rng": torch.get_rng_state()}

    if hook:  # Read back by name: each name of state() is set from the dict the hook returns.
        loop = hook(state())
        agent, optimizer, envs = loop["agent"], loop["optimizer"], loop["envs"]
        next_obs_np, global_step = loop["next_obs"], loop["global_step"]
        episodic_returns = loop["episodic_returns"]
        torch.set_rng_state(loop["rng"])
    if next_obs_np is None:  # A new run, or one resumed without its envs: new episodes.
        next_obs_np, _ = envs.reset(seed=args.seed)  # Env i is seeded with seed + i.
        next_obs_np = next_obs_np.astype(np.float32)  # float32, as the nets
    start_time, start_step, last_print = time.time(), global_step, 0
    for iteration in range(global_step // batch_size + 1, num_iterations + 1):
        if args.anneal_lr:  # α_i = α (I − i + 1)/I in iteration i of I
            frac = 1.0 - (iteration - 1.0) / num_iterations
            optimizer.param_groups[0]["lr"] = args.learning_rate * frac

        # --- rollout: T steps in each of the N envs with the current policy π_θ ---
        with torch.inference_mode():  # No gradient: the update recomputes log π and V.
            for step in range(args.num_steps):
                global_step += args.num_envs
                obs_np[step] = next_obs_np
                next_obs = torch.from_numpy(next_obs_np).to(device)  # (N, obs_dim)
                action, logprob, _, value = agent.get_action_and_value(next_obs)
                action_np = action.cpu().numpy()
                actions_np[step], logprobs_np[step], values_np[step] = (
                    action_np, logprob.cpu().numpy(), value.cpu().numpy())
                next_obs_np, reward, terminated, truncated, infos = envs.step(action_np)
                rewards_np[step] = reward
                terminations_np[step], truncations_np[step] = terminated, truncated
                next_obs_np = next_obs_np.astype(np.float32)
                if truncated.any():  # Bootstrap a cut episode with V of its real final observation.
                    idx = np.flatnonzero(truncated)
                    final_obs_np = np.stack(infos["final_obs"][idx])
                    final_obs = torch.as_tensor(final_obs_np, dtype=torch.float32, device=device)
                    final_values_np[step, idx] = agent.get_value(final_obs).cpu().numpy()
                for i in np.flatnonzero(infos.get("_episode", [])):  # The episodes that ended.
                    episode_return, length = infos["episode"]["r"][i], infos["episode"]["l"][i]
                    writer.add_scalar("charts/episodic_return", episode_return, global_step)
                    writer.add_scalar("charts/episodic_length", length, global_step)
                    episodic_returns.append((global_step, float(episode_return)))

        # --- bootstrap and advantages ---
        obs, actions, logprobs, values, final_values, rewards, terminations, truncations = (
            torch.tensor(x, device=device)  # (T, N, ...) copies of arrays the next rollout refills
            for x in (obs_np, actions_np, logprobs_np, values_np, final_values_np, rewards_np,
                      terminations_np, truncations_np))
        with torch.no_grad():
            next_obs = torch.from_numpy(next_obs_np).to(device)
            next_value = agent.get_value(next_obs)  # V(s_T), (N,): for paths cut by the batch end
        # V(s_{t+1}) of every step: the next stored value, or V(final obs) where the episode was
        # truncated. After a termination it is the reset observation's value, masked in GAE.
        next_values = torch.cat([values[1:], next_value[None]])
        next_values = torch.where(truncations.bool(), final_values, next_values)
        # --no-bootstrap-truncation, an ablation, counts a truncation as a termination, as CleanRL.
        terminal = (terminations if args.bootstrap_truncation
                    else torch.maximum(terminations, truncations))
        # The critic regresses on the λ-returns A + V, as in PPO's reference code, not on λ = 1.
        advantages, returns = compute_gae(rewards, values, next_values, terminal, truncations,
                                          args.gamma, args.gae_lambda)

        # --- flatten the batch: (T, N, ...) -> (T·N, ...) ---
        b_obs, b_actions = obs.reshape(-1, obs_dim), actions.reshape(-1)
        b_values, b_returns = values.reshape(-1), returns.reshape(-1)
        b_advantages = advantages.reshape(-1)
        b_logprobs = logprobs.reshape(-1)

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
                # Normalised per minibatch (core detail 7).
                if args.norm_adv:
                    mb_advantages = ((mb_advantages - mb_advantages.mean())
                                     / (mb_advantages.std() + 1e-8))
                loss, stats = ppo_loss(new_logprob, b_logprobs[mb_inds], mb_advantages, new_value,
                                       b_values[mb_inds], b_returns[mb_inds], entropy,
                                       args.clip_coef, args.clip_vloss, args.ent_coef, args.vf_coef)
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
        # Explained variance 1 − Var[R − V]/Var[R]. 1 is a perfect critic, ≤ 0 a useless one.
        errors_var, returns_var = (b_returns - b_values).var(), b_returns.var()
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
        if hook:  # The tooling: guard rails, checkpoints.
            hook(state(), losses)
    envs.close()
    writer.flush()  # On disk. It stays open: the tooling logs its evaluation to it after.
    return state()


# --- tooling: input checks, run folders, checkpoints, guard rails, evaluation, the command line ---
# Nothing below is part of the learning algorithm, and `train` calls none of it: cut the file
# here, add `if __name__ == "__main__": train(tyro.cli(Args))`, and it still trains and logs.
# `main` adds the rest around `train`, through its `writer` and `hook` arguments.
import ast
import fcntl
import glob
import hashlib
import importlib.util
import inspect
import io
import os
import re
import signal
import sys
import tempfile
import textwrap
import threading
import warnings
from dataclasses import fields

SCRIPT = os.path.basename(__file__).removesuffix(".py")
RELEASE, FORMAT = "0.4.0", 3  # pgref's release, and the format of the files it saves (CHANGELOG.md)
COMMITS = {"0.1.0": "8df3641", "0.2.0": "a031320"}  # Releases of other file formats: commits
LOCK = None  # The open <run>/.lock of the run that this process writes.
ALGORITHM = "ppo_discrete"  # The pgref script this file is, or was copied from


@dataclass
class RunArgs(Args):  # Args and the tooling's flags: --help lists both
    exp_name: str = SCRIPT
    """name of the experiment; part of the run directory runs/<env>__<exp>__<seed>__<time>"""
    log_dir: str = "runs"
    """folder that holds one sub-folder per run (TensorBoard events, checkpoint, videos)"""
    save_model: bool = False
    """save the policy to <run>/model.pt with each checkpoint and at the end of training"""
    checkpoint_every: int = 20
    """write <run>/checkpoint.pt every N updates and at the end of training (0: never)"""
    resume: str | None = None
    """go on with the run of this checkpoint.pt, its flags; a larger --total-timesteps extends it"""
    eval_episodes: int = 10
    """deterministic episodes after training (0: none), each cut at 10,000 steps at most"""
    eval_seed: int | None = None
    """seed ≥ 0 of evaluation episodes; by default --seed + 10,000 (seeds training never used)"""
    eval_checkpoint: str | None = None
    """evaluate this model.pt or checkpoint.pt, not train; other flags default to those it holds"""
    capture_video: bool = False
    """film the evaluation episodes into <run>/videos (needs: pip install moviepy)"""
    track: bool = False
    """mirror the TensorBoard logs to Weights & Biases (needs: pip install wandb)"""
    wandb_project_name: str = "pgref"
    """the W&B project of --track"""
    wandb_entity: str | None = None
    """the W&B team or user of --track (by default, your own)"""


def fail(message):
    """Stop with a one-line error and exit code 1."""
    raise SystemExit(f"{SCRIPT}.py: error: {message}")


def check_args(args):
    """Refuse a bad setup before anything is built, in one line that names the failed check.
    Warn of what may go wrong."""
    # Gymnasium before 1.1 has no SAME_STEP autoreset. Its vector RecordEpisodeStatistics in
    # 1.1-1.3 logs every episode after an env's first one step short, without its first reward.
    if tuple(map(int, gym.__version__.split(".")[:2])) < (1, 4):
        fail(f"needs gymnasium 1.4 or newer, found {gym.__version__}: pip install -U gymnasium")
    if args.cuda and not torch.cuda.is_available():
        fail("--cuda: torch finds no usable GPU; leave out --cuda to train on the CPU")
    for flag, module in (("capture_video", "moviepy"), ("track", "wandb")):
        if getattr(args, flag) and not importlib.util.find_spec(module):
            fail(f"--{flag.replace('_', '-')} needs {module}: pip install {module}")
    if args.capture_video and sys.platform == "linux":  # Render with no display: MuJoCo, pygame.
        os.environ.setdefault("MUJOCO_GL", "egl")
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
    # Each flag's help: the string below its field, read from the source (ast).
    body = [node for cls in (Args, RunArgs) for node in ast.parse(textwrap.dedent(
        inspect.getsource(cls))).body[0].body]
    helps = {field.target.id: text.value.value for field, text in zip(body, body[1:], strict=False)
             if isinstance(field, ast.AnnAssign) and isinstance(text, ast.Expr)}
    for name, value in asdict(args).items():  # Type, not isinstance: a bool is no number here.
        # A flag may be 0 where its help says "(0: ...)", "≥ 0" or "in [0, 1]".
        help = helps.get(name, "")
        zero = re.search(r"\(0:|≥ 0|\[0, 1]", help)
        if type(value) in (int, float) and not (0 < value < np.inf or zero and value == 0):
            fail(f"--{name.replace('_', '-')} must be finite and {'>= 0' if zero else 'positive'}"
                 f", not {value}")
        if "[0, 1]" in help and value > 1:
            fail(f"--{name.replace('_', '-')} must lie in [0, 1]")
    batch_size = args.num_envs * args.num_steps
    if batch_size > args.total_timesteps:
        fail(f"--total-timesteps {args.total_timesteps} is less than one batch of --num-envs × "
             f"--num-steps = {batch_size} steps")
    if batch_size % args.num_minibatches:
        fail(f"--num-minibatches {args.num_minibatches} does not divide the batch of --num-envs "
             f"× --num-steps = {batch_size} steps")
    if args.norm_adv and batch_size < 2 * args.num_minibatches:  # The std of one number: NaN.
        fail(f"--norm-adv needs minibatches of 2 steps or more, not {batch_size} // "
             f"{args.num_minibatches}: fewer --num-minibatches, or --no-norm-adv")
    video = {"render_mode": "rgb_array"} if args.capture_video else {}  # Checked before training.
    try:
        env = make_env(args.env_id, **video)
    except (gym.error.Error, ImportError) as error:  # Gymnasium's message says why.
        fail(f"--env-id {args.env_id}: {error} (an env of your own is given as module:EnvId)")
    except TypeError as error:  # An env of your own whose __init__ takes no render_mode.
        fail(f"--env-id {args.env_id}: {error}")
    if video and env.render_mode != "rgb_array":
        fail(f"--capture-video: {args.env_id} renders no rgb_array frames")
    # From here on, DeprecationWarnings are ignored: Gymnasium's for an old env was said above.
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    space = env.observation_space
    if not isinstance(space, gym.spaces.Box) or len(space.shape) != 1:
        fail(f"{args.env_id} has observations {space}; the script takes vectors: " + (
            "images are out of its scope" if isinstance(space, gym.spaces.Box) else "in make_env, "
            "wrap the env in gym.wrappers.FlattenObservation(env)"))
    space = env.action_space
    if isinstance(space, gym.spaces.Discrete) and space.start != 0:
        fail(f"{args.env_id} has actions {space}; the script needs them to start at 0: in "
             f"make_env, wrap the env in gym.wrappers.TransformAction(env, lambda a: a + "
             f"{space.start}, gym.spaces.Discrete({space.n}))")
    if not isinstance(space, gym.spaces.Discrete):
        fail(f"{args.env_id} has actions {space}; the script needs Discrete(n)" + (
            ": for Box actions use ppo_continuous.py" if isinstance(space, gym.spaces.Box)
            and len(space.shape) == 1 else
            ", and no pgref script takes this space (they take Discrete(n) or a flat Box)"))
    if getattr(env.spec, "max_episode_steps", None) is None:
        print(f"warning: {args.env_id} has no time limit, so an episode may never end and give "
              "no return; in make_env, give it one: gym.make(env_id, max_episode_steps=1000)",
              file=sys.stderr)


class EnvGuard(gym.vector.VectorWrapper):
    """Stops the run (FloatingPointError) at the step where the env raises an exception, or
    returns a NaN or inf observation or reward, before `train` stores it."""

    def reset(self, **kwargs):
        try:
            return self.env.reset(**kwargs)
        except Exception as error:  # `main` names it in one line.
            raise FloatingPointError(f"its reset raised {type(error).__name__}: {error}") from error

    def step(self, actions):
        try:
            out = obs, rewards, _, _, infos = self.env.step(actions)
        except Exception as error:  # `main` names it in one line.
            raise FloatingPointError(f"its step raised {type(error).__name__}: {error}") from error
        for culprit, values in ("observation", [obs, *infos.get("final_obs", [])]), (
                "reward", [rewards]):
            if not all(v is None or np.isfinite(v).all() for v in values):
                raise FloatingPointError(f"the env returned a NaN or inf {culprit} in a rollout, "
                                         "and needs fixing")
        return out


def write(content, path):
    """Save `content` to `path` with torch.save, framed: b"pgref\\n", torch.save's bytes,
    b"\\npgref <FORMAT> <RELEASE>\\n", then the SHA-256 of all before it. So `load` tells a file
    changed anywhere, or cut short, and which release wrote it. The file is written under another
    name, then renamed: a kill during the write leaves the last file whole."""
    data = io.BytesIO()
    torch.save(content, data)
    data = b"pgref\n" + data.getvalue() + f"\npgref {FORMAT} {RELEASE}\n".encode()
    try:
        with open(path + ".tmp", "wb") as file:
            file.write(data + hashlib.sha256(data).digest())
        os.replace(path + ".tmp", path)
    finally:  # A write cut short (a full disk) leaves no part of a file behind.
        if os.path.exists(path + ".tmp"):
            os.remove(path + ".tmp")


def load(path, resume):
    """The checkpoint.pt of a run of this script (`resume`), or the model.pt or checkpoint.pt of
    a policy to evaluate (on the CPU), or a one-line refusal that says what is wrong with the file.
    A policy may come from a renamed copy of this script (`saved_args` names it). Another
    script's policy is refused, naming the script to use. A file whose name starts with
    "checkpoint" holds pickled objects, and unpickling runs code: give only files of your own
    runs. Any other file is read as a model.pt: tensors, numbers and strings, safe to load."""
    if os.path.isdir(path):
        fail(f"{path} is a folder: give the file, <run>/{'checkpoint' if resume else 'model'}.pt")
    try:
        with open(path, "rb") as file:
            data = file.read()
    except OSError as error:
        fail(f"{path}: {error.strerror}")
    content, framed, trailer = data[:-32].rpartition(b"\npgref ")
    framed = framed or data.startswith(b"pgref\n")  # One flipped byte leaves one of the two.
    # The files of pgref 0.2.0 and 0.1.0 are not framed. A key near their start tells them:
    # "sha256" in format 2's envelope (checked first), "script" in format 1's content.
    old = [v for k, v in {b"sha256": "2 0.2.0", b"script": "1 0.1.0"}.items() if k in data[:999]]
    if not (framed or old):
        fail(f"{path} is no model.pt or checkpoint.pt that pgref wrote")
    if framed and hashlib.sha256(data[:-32]).digest() != data[-32:]:
        fail(f"{path} is damaged (cut short, or changed since it was written): its SHA-256 is not "
             "the one saved with it")
    version, release = (trailer.decode() if framed else old[0]).split()
    if version != str(FORMAT):  # A command that works in any clone of main, where one is known.
        reader = f"git checkout {COMMITS[release]}" if release in COMMITS else f"pgref {release}"
        fail(f"{path} was written by pgref {release} (file format {version}), and {SCRIPT}.py "
             f"of pgref {RELEASE} reads format {FORMAT}: {reader} reads it")
    try:
        pickled = resume or os.path.basename(path).startswith("checkpoint")
        saved = torch.load(io.BytesIO(content[6:]), weights_only=not pickled,
                           map_location=None if resume else "cpu")
        if not resume and "state" in saved:  # A checkpoint.pt evaluated: its agent's weights.
            saved.update(model=saved["state"]["agent"].state_dict(),
                         global_step=saved["state"]["global_step"])
        if not resume and saved.get("algorithm", saved["script"]) != ALGORITHM:  # (before 0.4.0)
            fail(f"{path} was written by {saved['script']}.py, whose policy {SCRIPT}.py cannot "
                 f"read: evaluate it with {saved['script']}.py")
        if (saved["script"] == SCRIPT or not resume) and ("state" in saved or not resume):
            return saved
    except ModuleNotFoundError as error:  # The module of an env of your own, module:EnvId.
        fail(f"{path} needs the module {error.name}, which Python cannot import from here: run "
             "in its folder, or add that folder to PYTHONPATH")
    except AttributeError as error:  # A class renamed, or gone from its module.
        fail(f"{path} needs a class that Python cannot find ({error}): run the code that wrote it")
    except Exception:  # A pickle weights_only refuses, or another script's classes.
        pass
    what = f"checkpoint.pt of {SCRIPT}.py" if resume else "model.pt or checkpoint.pt it can read"
    fail(f"{path} is no {what}: --resume takes <run>/checkpoint.pt of a run of the script given "
         "it, --eval-checkpoint <run>/model.pt (--save-model) or <run>/checkpoint.pt")


def saved_args(saved, path, resume):
    """The flags saved in a file, as RunArgs. A flag that the script has and the file lacks
    takes its default. One that the file has and the script lacks is ignored, or, for a --resume,
    refused. Each is named in one line, and so is the script that wrote the file if another."""
    if saved["script"] != SCRIPT:  # A renamed copy of this script.
        print(f"note: {path} was written by {saved['script']}.py", file=sys.stderr)
    names = {f.name for f in fields(RunArgs)}
    for name in sorted(saved["args"].keys() ^ names):  # Added to the script, or taken out of it.
        flag = f"--{name.replace('_', '-')}"
        if name in names:
            print(f"note: {path} has no {flag}: it takes its default, {getattr(RunArgs, name)}",
                  file=sys.stderr)
        elif resume:
            fail(f"--resume: {path} was trained with {flag}, which {SCRIPT}.py lacks: resume "
                 "with the script that wrote it")
        else:
            print(f"note: {path} has {flag}, which {SCRIPT}.py lacks: ignored", file=sys.stderr)
    return RunArgs(**{k: v for k, v in saved["args"].items() if k in names})


def evaluate(agent, args, folder):
    """Play --eval-episodes episodes, each cut at 10,000 steps at most, and print and return
    their returns. --capture-video films them into <folder>/videos. The agent acts through
    `greedy_action` alone, with its memory reset at each episode's start. A Box action is clipped
    to the env's bounds."""
    video = {"render_mode": "rgb_array"} if args.capture_video else {}
    env = gym.wrappers.TimeLimit(make_env(args.env_id, **video), 10_000)  # Or it may never end.
    if args.capture_video:
        env = gym.wrappers.RecordVideo(env, f"{folder}/videos", lambda _: True)
    if isinstance(env.action_space, gym.spaces.Box):  # A mean may lie outside the bounds.
        env = gym.wrappers.ClipAction(env)
    env = gym.wrappers.RecordEpisodeStatistics(env, args.eval_episodes)  # Keeps every return.
    seed, last_print = args.seed + 10_000 if args.eval_seed is None else args.eval_seed, time.time()
    for episode in range(args.eval_episodes):
        obs, _ = env.reset(seed=seed if episode == 0 else None)  # The first seed fixes them all.
        done, memory, steps = False, None, 0
        while not done:
            action, memory = agent.greedy_action(obs, memory)
            obs, _, terminated, truncated, _ = env.step(action)
            done, steps = terminated or truncated, steps + 1
            if time.time() - last_print > 5:  # A long evaluation says how far it is.
                last_print = time.time()
                print(f"evaluating: episode {episode + 1}/{args.eval_episodes}, {steps:,} steps "
                      "played", flush=True)
    env.close()
    print(f"{args.env_id}: mean return {np.mean(env.return_queue):.2f} ± "
          f"{np.std(env.return_queue):.2f} over {args.eval_episodes} episodes (seed {seed})")
    return np.ravel(env.return_queue).tolist()  # Floats: a reward may be an array of one.


def load_agent(path, args=None):
    """The Agent saved in a model.pt (--save-model), for code of your own
    (docs/usage.md, "Long runs"), or in a checkpoint.pt. `args` are the flags to build it with,
    by default those saved with it. Act with `agent.greedy_action(obs, memory)`. model.pt's
    content holds "script", "algorithm", "model" (the state_dict), "args" (the flags, a dict) and
    "global_step"."""
    saved = load(path, resume=False)
    args = args or saved_args(saved, path, resume=False)
    env = make_env(args.env_id)
    agent = Agent(env.observation_space.shape[0], int(env.action_space.n), args.hidden_size)
    agent.load_state_dict(saved["model"])
    return agent


def stopped(folder, why, code=1, resume=True):
    """Exit with one line: why the run stopped, and what is on disk. That is the --resume command
    where a checkpoint.pt exists (and `resume`), or else the files saved. Exit code 1 is an
    error's (`fail`), 130 and 143 the shell's for Ctrl-C and SIGTERM."""
    on_disk = sorted(glob.glob(f"{folder}/*.pt"))  # checkpoint.pt, then model.pt
    resume = resume and os.path.isfile(f"{folder}/checkpoint.pt")
    line = f"{why}; " + (f"--resume {folder}/checkpoint.pt goes on from its last checkpoint"
                         if resume else f"saved: {' and '.join(on_disk) or 'nothing'}")
    if code == 1:
        fail(line)
    print(f"{SCRIPT}.py: {line}", file=sys.stderr)
    raise SystemExit(code)


def interrupt(signum, _frame):
    """SIGTERM (a scheduler's stop, `timeout`'s) is met as Ctrl-C (SIGINT) is. Once one came, the
    next are ignored, so that the stop ends as it began."""
    if not interrupt.came:
        interrupt.came = signum
        raise KeyboardInterrupt(signum)


interrupt.came = False


def interrupted(error, when):
    """What `stopped` says of a Ctrl-C or SIGTERM `when`, and the shell's exit code for it:
    128 + the signal's number, 130 or 143."""
    sigterm = error.args == (signal.SIGTERM,)
    return f"{'stopped by SIGTERM' if sigterm else 'interrupted'} {when}", 143 if sigterm else 130


def main(args: RunArgs | None = None) -> dict:
    """Train, with the tooling around `train`. Or go on with the run of a --resume checkpoint. Or
    evaluate the policy of an --eval-checkpoint file. Flags not given take the values saved
    in the file. With --resume, a flag of `Args` that differs from the run's is refused, but for
    --total-timesteps: a larger one extends the run. With --eval-checkpoint, one that changes
    what the model means is refused (all of `Args` but --env-id, --seed, --num-threads, --cuda).
    `args`: from code of one's own (where the fields that differ from their defaults count as
    given), or else the command line. Returns `train`'s state with the run's folder (run_dir)
    and eval_returns. With --eval-checkpoint, it returns only eval_returns."""
    cli, args = args is None, args or tyro.cli(RunArgs)
    path = args.resume or args.eval_checkpoint
    saved = path and load(path, resume=bool(args.resume))
    if saved:  # The file's flags, but for those given (not its --resume or --eval-checkpoint).
        old = dict(asdict(saved_args(saved, path, args.resume)), resume=None, eval_checkpoint=None)
        args = (tyro.cli(RunArgs, default=RunArgs(**old)) if cli else RunArgs(
            **{k: old[k] if v == getattr(RunArgs, k) else v for k, v in asdict(args).items()}))
        allowed = ["total_timesteps"] if args.resume else ["env_id", "seed", "num_threads", "cuda"]
        for name in [f.name for f in fields(Args) if getattr(args, f.name) != old[f.name]]:
            if name not in allowed:  # The model's meaning (--eval-checkpoint), or the run's.
                fail(f"{'--resume' if args.resume else '--eval-checkpoint'} takes the flags the "
                     f"file was trained with: leave out --{name.replace('_', '-')}")
    check_args(args)
    if args.eval_checkpoint:
        try:
            return {"eval_returns": evaluate(load_agent(path, args), args, os.path.dirname(path))}
        except RuntimeError as error:  # Weights that do not fit: torch's line, its first misfit.
            first = " ".join(str(error).split("\n\t")[:2])
            fail(f"--eval-checkpoint {path}: {first}")

    # Each run gets its own folder, even where another run took its name. A resumed run reopens
    # its checkpoint's folder. There TensorBoard drops what was logged after the checkpoint, and
    # the run logs it again.
    # The env id without the module of module:EnvId, and one folder: no ':' or '/' in its name.
    env_name = re.sub(r"[^\w.-]", "-", args.env_id.rpartition(":")[2])
    name = f"{env_name}__{args.exp_name}__{args.seed}__{int(time.time())}"
    folder = os.path.dirname(os.path.abspath(path)) if saved else f"{args.log_dir}/{name}"
    global LOCK  # A run locks its folder. A new run in this process unlocks the last one's.
    try:
        try:
            os.makedirs(folder, exist_ok=bool(saved))
        except FileExistsError:  # A run started in the same second.
            folder = tempfile.mkdtemp(prefix=name + "_", dir=args.log_dir)
        if LOCK:
            LOCK.close()
        LOCK = open(f"{folder}/.lock", "a")
        fcntl.flock(LOCK, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        fail(f"{folder} is in use by another run; wait for it to end, or resume a copy of it")
    except OSError as error:  # Before training: the folder cannot be made or written.
        fail(f"cannot write the run folder {folder}: {error.strerror}; give a --log-dir you can "
             "write")
    if args.track:  # Before the writer: W&B mirrors what it writes.
        import wandb
        name = os.path.basename(folder)
        wandb.init(project=args.wandb_project_name, entity=args.wandb_entity, name=name, id=name,
                   config=asdict(args), resume="allow", dir=folder, sync_tensorboard=True)
    logs = set(glob.glob(f"{folder}/events.*"))
    # TensorBoard's writing thread meets an OSError of the folder first. It passes it on to the
    # next log call, which stops the run in one line, so the thread need not print it too.
    threading.excepthook = lambda hook: issubclass(hook.exc_type, OSError) or (
        threading.__excepthook__(hook))
    writer = SummaryWriter(folder, purge_step=saved and saved["state"]["global_step"] + 1)
    updates, written = 0, {}  # written: each file this run saved, and the step it is of

    def refuse(message):
        """Refuse a --resume, leaving its folder as it was: no new log file."""
        writer.close()
        for new in set(glob.glob(f"{folder}/events.*")) - logs:
            os.remove(new)
        fail(message)

    def hook(state, losses=None):
        """`train`'s hook. At its start (no `losses`): put the --resume checkpoint's state in
        place of the new one, by name, guard the envs, and return the state to go on with. After
        each update: stop on a NaN or inf loss or weight, warn of a collapsed policy, and save
        every --checkpoint-every updates."""
        nonlocal updates
        if losses is None:
            differ = saved and (set(state) ^ set(saved["state"])) - {"envs", "next_obs"}
            if differ:  # The envs may be left out: see `save`.
                refuse(f"--resume: the names {sorted(differ)} are in one of {path} and train's "
                     "state(), not in both: resume with the code that wrote it")
            state.update(saved["state"] if saved else {})
            if saved and "envs" not in saved["state"]:  # Envs not saved: see `save`.
                print(f"note: {args.env_id} cannot be saved mid-episode, so the run goes on with "
                      "new episodes, not exactly as if never stopped", file=sys.stderr)
            state["envs"] = EnvGuard(state["envs"])
            return state
        weights = nn.utils.parameters_to_vector(state["agent"].parameters()).detach()
        if not np.isfinite(sum(losses.values()) + weights.sum().item()):
            raise FloatingPointError("a loss or weight became NaN or inf in an update: a learning "
                                     "rate too large? rewards of huge scale?")
        # A collapse: the update's logged KL estimate (approx_kl) is above 1 nat, far above the
        # 0.01 to 0.05 that --target-kl typically allows. With `get`, a statistic renamed in
        # `train` turns the check off and never breaks the run.
        if losses.get("approx_kl", 0) > 1:
            print(f"warning: the policy collapsed at step {state['global_step']:,}: a KL of "
                  f"{losses['approx_kl']:.3g} nats in one update (entropy now "
                  f"{losses.get('entropy', np.nan):.3g}); a step size too large?",
                  file=sys.stderr)
        updates += 1
        if args.checkpoint_every and updates % args.checkpoint_every == 0:
            save(state)
        came = getattr(signal.getsignal(signal.SIGINT), "came", False)  # `interrupt`, as installed
        if came:  # A signal came, and its KeyboardInterrupt was lost (in torch.save's pickler).
            raise KeyboardInterrupt(came)

    def cannot_write(error, when):
        """`stopped`'s line for an OSError: what failed, and the step of each file that this run
        saved and that is still on disk."""
        on_disk = ", ".join(f"{name} of step {step:,}" for name, step in written.items()
                            if os.path.isfile(f"{folder}/{name}"))
        return f"cannot write {folder}: {error.strerror}, {when}" + (on_disk and f" ({on_disk})")

    def save(state):
        """Write model.pt (with --save-model) and checkpoint.pt (with --checkpoint-every), and
        flush the logs. checkpoint.pt holds `train`'s state by its names, and the flags. EzPickle
        envs (Box2D, MuJoCo, ALE) pickle only the arguments that made them. They are kept only
        where a wrapper defines `pickles_state` and pickles their state. Otherwise they are left
        out with their observations, as are envs that do not pickle at all (a lambda in a
        wrapper), and a resumed run begins new episodes."""
        writer.flush()
        if args.save_model:  # Only tensors, numbers, strings: safe to load.
            write({"script": SCRIPT, "algorithm": ALGORITHM, "model": state["agent"].state_dict(),
                   "args": asdict(args), "global_step": state["global_step"]}, f"{folder}/model.pt")
            written["model.pt"] = state["global_step"]
        if not args.checkpoint_every:
            return
        envs = state["envs"].env  # Without the EnvGuard.
        without_envs = {k: v for k, v in state.items() if k not in ("envs", "next_obs")}
        first = envs.unwrapped.envs[0]
        exact = first.has_wrapper_attr("pickles_state") or not isinstance(
            first.unwrapped, gym.utils.EzPickle)
        for kept in [dict(state, envs=envs)] * exact + [without_envs]:
            try:  # Without the envs where they do not pickle.
                write({"script": SCRIPT, "algorithm": ALGORITHM, "args": asdict(args),
                       "state": kept}, f"{folder}/checkpoint.pt")
                written["checkpoint.pt"] = state["global_step"]
                return
            except OSError:  # A full disk: `main` stops the run and says what is on disk.
                raise
            except Exception as error:  # An object that does not pickle: a lambda, a local class.
                failure = error
        args.checkpoint_every = 0  # Said once: the run goes on without checkpoints.
        print(f"warning: no checkpoint: {failure}", file=sys.stderr)

    # A guard rail or a Ctrl-C stops the run at once. Its checkpoint.pt and model.pt are then
    # those of its last checkpoint, if any, whose weights are finite. Its logs reach at least that
    # far, and a --resume drops what was logged after it. After training, the files are written
    # (as --checkpoint-every and --save-model ask), and the policy is evaluated.
    try:
        state = train(args, writer, hook)
    except FloatingPointError as error:  # A guard rail: the env's step, a NaN or inf.
        stopped(folder, f"{args.env_id}: {error}, in training")
    except OSError as error:  # Mostly the run folder, deleted or full.
        stopped(folder, cannot_write(error, "in training"))
    except KeyboardInterrupt as error:  # Ctrl-C or SIGTERM (`interrupt`)
        stopped(folder, *interrupted(error, "in training"))
    if saved and not updates:
        refuse(f"--resume: the run has trained its {state['global_step']:,} steps; give a larger "
             "--total-timesteps")
    try:
        save(state)
        if args.save_model:
            print(f"model saved to {folder}/model.pt")
        eval_returns = evaluate(state["agent"].cpu(), args, folder) if args.eval_episodes else []
    except KeyboardInterrupt as error:
        stopped(folder, *interrupted(error, "after training (saving or evaluating)"), resume=False)
    except OSError as error:
        stopped(folder, cannot_write(error, "after training"))
    for episode_return in eval_returns:  # At the step of the policy evaluated.
        writer.add_scalar("eval/episodic_return", episode_return, state["global_step"])
    writer.close()
    LOCK.close()
    return dict(state, run_dir=folder, eval_returns=eval_returns)


if __name__ == "__main__":
    # Run as the module named after the file, not as __main__. A checkpoint then names this
    # file's classes by the file's name, so code of one's own that imports the script loads it.
    signal.signal(signal.SIGINT, interrupt)
    signal.signal(signal.SIGTERM, interrupt)
    try:
        importlib.import_module(SCRIPT).main()
    except KeyboardInterrupt as error:  # Before training, or in an --eval-checkpoint evaluation.
        why, code = interrupted(error, "before training or in an evaluation")
        print(f"{SCRIPT}.py: {why}: no model.pt or checkpoint.pt was saved", file=sys.stderr)
        raise SystemExit(code) from None
