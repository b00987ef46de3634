"""pgref's tooling, written once for the seven scripts: input checks, run folders and their lock,
checkpoints and --resume, guard rails, evaluation and --eval-checkpoint, video, --track, signals.

    python ppo_discrete.py --help      # a script with this file beside it (or on the path)
    python ppo_discrete.py --resume runs/<run>/checkpoint.pt --total-timesteps 1000000

A script also runs alone: where this file cannot be imported, its `__main__` calls
`train(tyro.cli(Args))`. With this file importable, the script hands itself to `cli`, and `main`
adds the tooling around `train`, through its `writer` and `hook` arguments. `train` calls nothing
here.

What a script offers, by name (what differs between the scripts):
- `ALGORITHM, RELEASE`: the pgref script it is, or was copied from, and its release. A script of
  another release than this file is refused in one line.
- `SPACES`: the observations it takes ("vector" or "image") and its actions ("Discrete", "Box",
  or "Discrete or Box"). Other spaces are refused in one line, with what to do where a wrapper or
  another script fits.
- `Args`, `make_env(env_id, **kwargs)` and `train(args, writer, hook)`. A keyword of
  `make_env` named as a flag gets the flag's value (ppo_atari.py's `sticky_actions`), and
  --eval-checkpoint takes such a flag. `train` calls `hook` with its `state()` dict at its start,
  and with the state and the update's losses after each update. It goes on with the dict that the
  first call returns, and returns its state at the end.
  The tooling needs the state's "agent", "envs" and "global_step", and the flags env_id, seed,
  cuda, total_timesteps, and num_envs with num_steps (or batch_size).
- `Agent`, and `make_agent(args, observation_space, action_space)`: the Agent that a model.pt's
  weights load into. The tooling acts with `agent.greedy_action(obs, memory)`, and with
  --eval-sampled with `agent.sampled_action(obs, memory)` too. --eval-sampled is refused where the
  class `Agent` has no `sampled_action`.
- Optionally, a wrapper in `make_env` that has an attribute `pickles_state`: envs that pickle
  their own state (ALE's). Such envs are kept in a checkpoint, and a resume goes on mid-episode.
"""

import ast
import contextlib
import fcntl
import glob
import hashlib
import importlib
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
import time
import warnings
from dataclasses import asdict, dataclass, fields, make_dataclass

import gymnasium as gym
import numpy as np
import torch
import tyro
from torch.utils.tensorboard import SummaryWriter

RELEASE, FORMAT = "0.5.0", 3  # pgref's release, and the format of the files it saves (CHANGELOG.md)
COMMITS = {"0.1.0": "8df3641", "0.2.0": "a031320"}  # Releases of other file formats: commits
LOCK = None  # The open <run>/.lock of the run that this process writes.


@dataclass
class RunFlags:  # The tooling's flags. run_args(script) adds them to the script's Args.
    exp_name: str = ""
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
    """greedy episodes after training (0: none), each to the env's time limit (else 10,000 steps)"""
    eval_sampled: bool = False
    """after the greedy episodes, play as many with actions sampled from π (sampled_action)"""
    eval_seed: int | None = None
    """seed ≥ 0 of evaluation episodes; by default --seed + 10,000 (seeds training never used)"""
    eval_checkpoint: str | None = None
    """evaluate this model.pt or checkpoint.pt, not train; other flags default to those it holds"""
    capture_video: bool = False
    """film the greedy evaluation episodes into <run>/videos (needs: pip install moviepy)"""
    track: bool = False
    """mirror the TensorBoard logs to Weights & Biases (needs: pip install wandb)"""
    wandb_project_name: str = "pgref"
    """the W&B project of --track"""
    wandb_entity: str | None = None
    """the W&B team or user of --track (by default, your own)"""


RUN_ARGS = {}  # script module: its RunArgs


def run_args(script):
    """The script's RunArgs: its Args and RunFlags, whose --help lists both. --exp-name defaults
    to the script's name."""
    if script not in RUN_ARGS:
        RUN_ARGS[script] = make_dataclass("RunArgs", [("exp_name", str, name(script))],
                                          bases=(RunFlags, script.Args))
        RUN_ARGS[script].__module__ = script.__name__
    return RUN_ARGS[script]


def name(script):
    """The script's file name without .py: the name it runs and saves under."""
    return os.path.basename(script.__file__).removesuffix(".py")


class Refused(SystemExit):
    """A one-line refusal (exit code 1). `named` puts the script's name before it."""


def fail(message):
    """Stop with a one-line error and exit code 1."""
    raise Refused(message)


def say(line):
    """Print a note, a warning or the stop line of an interrupted run to stderr. The run's
    progress and the evaluation's returns go to stdout."""
    print(line, file=sys.stderr)


@contextlib.contextmanager
def named(script):
    """A refusal inside, as the script's line: "<script>.py: error: <message>"."""
    try:
        yield
    except Refused as refusal:
        raise SystemExit(f"{name(script)}.py: error: {refusal}") from None


def check_release(script):
    """Refuse a script of another release than this file's, naming both."""
    release = getattr(script, "RELEASE", "an unknown release (no RELEASE)")
    if release != RELEASE:
        fail(f"{name(script)}.py is of pgref {release} and tooling.py of pgref {RELEASE}: use the "
             "tooling.py of the script's release (CHANGELOG.md names each release's commit)")


def check_flags(script, args):
    """Refuse a flag outside its range, or flags that do not fit together."""
    # Each flag's help: the string below its field, read from the source (ast).
    body = [node for cls in (script.Args, RunFlags) for node in ast.parse(textwrap.dedent(
        inspect.getsource(cls))).body[0].body]
    helps = {field.target.id: text.value.value for field, text in zip(body, body[1:], strict=False)
             if isinstance(field, ast.AnnAssign) and isinstance(text, ast.Expr)}
    for flag, value in asdict(args).items():  # Type, not isinstance: a bool is no number here.
        # A flag may be 0 where its help says "(0: ...)", "≥ 0", "in [0, 1]" or "in [0, 1)".
        help = helps.get(flag, "")
        zero, unit = re.search(r"\(0:|≥ 0|\[0, 1[])]", help), re.search(r"\[0, 1[])]", help)
        if type(value) in (int, float) and not (0 < value < np.inf or zero and value == 0):
            fail(f"--{flag.replace('_', '-')} must be finite and {'>= 0' if zero else 'positive'}"
                 f", not {value}")
        if unit and value is not None and (value > 1 or value == 1 and unit[0].endswith(")")):
            fail(f"--{flag.replace('_', '-')} must lie in {unit[0]}")
    if hasattr(args, "num_steps"):
        batch, of = args.num_envs * args.num_steps, "--num-envs × --num-steps = "
    else:
        batch, of = args.batch_size, "--batch-size "
    if batch > args.total_timesteps:
        fail(f"--total-timesteps {args.total_timesteps} is less than one batch of {of}{batch} "
             "steps")
    minibatches = getattr(args, "num_minibatches", 1)
    if script.ALGORITHM == "ppo_recurrent" and args.num_envs % minibatches:
        fail(f"--num-minibatches {minibatches} does not divide --num-envs {args.num_envs}")
    elif script.ALGORITHM != "ppo_recurrent" and batch % minibatches:
        fail(f"--num-minibatches {minibatches} does not divide the batch of {of}{batch} steps")
    elif getattr(args, "norm_adv", False) and batch < 2 * minibatches:  # One number's std: NaN.
        fail(f"--norm-adv needs minibatches of 2 steps or more, not {batch} // {minibatches}: "
             "fewer --num-minibatches, or --no-norm-adv")


def check_spaces(script, args, env):
    """Refuse an env whose spaces the script does not take, in one line, with what to do where a
    wrapper or another script fits."""
    observations, actions = script.SPACES  # ("vector" or "image", "Discrete", "Box" or both)
    space, flat = env.observation_space, lambda s: isinstance(s, gym.spaces.Box) and len(s.shape)
    if observations == "image" and flat(space) != 3:
        fail(f"{args.env_id} has observations {space}; the script takes images, (H, W, C)"
             + (": for vectors use ppo_discrete.py" if flat(space) == 1 else ""))
    if observations == "vector" and flat(space) != 1:
        fail(f"{args.env_id} has observations {space}; the script takes vectors: " + (
            "images are out of its scope" if flat(space) else "in make_env, wrap the env in "
            "gym.wrappers.FlattenObservation(env)"))
    space = env.action_space
    kind = "Discrete" if isinstance(space, gym.spaces.Discrete) else "Box" * (flat(space) == 1)
    if kind == "Discrete" and space.start != 0 and kind in actions:
        fail(f"{args.env_id} has actions {space}; the script needs them to start at 0: in "
             f"make_env, wrap the env in gym.wrappers.TransformAction(env, lambda a: a + "
             f"{space.start}, gym.spaces.Discrete({space.n}))")
    if not kind or kind not in actions:
        needs = actions.replace("Discrete", "Discrete(n)").replace("Box", "a flat Box")
        fail(f"{args.env_id} has actions {space}; the script needs {needs}" + (
            f": for {kind} actions use {'ppo_discrete' if kind == 'Discrete' else 'ppo_continuous'}"
            ".py" if kind else ", and no pgref script takes this space (they take Discrete(n) or "
            "a flat Box)"))


def check_args(script, args):
    """Refuse a bad setup before the run starts, in one line that names the failed check. Warn
    of what may go wrong."""
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
    check_flags(script, args)
    if args.eval_sampled and not hasattr(script.Agent, "sampled_action"):
        fail(f"--eval-sampled: the Agent of {name(script)}.py has no sampled_action(obs, memory)")
    video = {"render_mode": "rgb_array"} if args.capture_video else {}  # Checked before training.
    try:
        env = make_env(script, args, **video)
    except ImportError as error:  # ALE's or MinAtar's package, or an env of your own's module.
        package = {"ale_py": "ale-py", "minatar": "minatar"}.get(error.name)
        fail(f"--env-id {args.env_id}: " + (f"needs {error.name}: pip install {package}" if package
                                            else f"{error} (an env of your own is module:EnvId)"))
    except gym.error.Error as error:  # Gymnasium's message says why.
        fail(f"--env-id {args.env_id}: {error} (an env of your own is given as module:EnvId)")
    except TypeError as error:  # An env of your own whose __init__ takes no render_mode.
        fail(f"--env-id {args.env_id}: {error}")
    if video and env.render_mode != "rgb_array":
        fail(f"--capture-video: {args.env_id} renders no rgb_array frames")
    # From here on, DeprecationWarnings are ignored: Gymnasium's for an old env was said above.
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    check_spaces(script, args, env)
    if getattr(env.spec, "max_episode_steps", None) is None:
        say(f"warning: {args.env_id} has no time limit, so an episode may never end and give "
            "no return; in make_env, give it one: gym.make(env_id, max_episode_steps=1000)")


class EnvGuard(gym.vector.VectorWrapper):
    """Stops the run (FloatingPointError) at the step where the env raises an exception, or
    returns a NaN or inf observation or reward, before `train` stores it."""

    def reset(self, **kwargs):
        try:
            return self.env.reset(**kwargs)
        except Exception as error:  # `Run.train` names it in one line.
            raise FloatingPointError(f"its reset raised {type(error).__name__}: {error}") from error

    def step(self, actions):
        try:
            out = obs, rewards, _, _, infos = self.env.step(actions)
        except Exception as error:  # `Run.train` names it in one line.
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


def unframe(path, resume, reader):
    """The torch.save bytes of a file `write` wrote, or a one-line refusal: not pgref's, damaged,
    or of another file format (with the command that reads it)."""
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
        command = f"git checkout {COMMITS[release]}" if release in COMMITS else f"pgref {release}"
        fail(f"{path} was written by pgref {release} (file format {version}), and {reader}.py "
             f"of pgref {RELEASE} reads format {FORMAT}: {command} reads it")
    return content[6:]


def load(script, path, resume):
    """The checkpoint.pt of a run of this script (`resume`), or the model.pt or checkpoint.pt of
    a policy to evaluate (on the CPU), or a one-line refusal that says what is wrong with the file.
    A policy may come from a renamed copy of this script (`saved_args` names it). Another
    script's policy is refused, naming the script to use. A file whose name starts with
    "checkpoint" holds pickled objects, and unpickling runs code: give only files of your own
    runs. A --resume unpickles its file whatever its name. Otherwise a file whose name does not
    start with "checkpoint" is read as a model.pt: tensors, numbers and strings, safe to load."""
    me = name(script)
    content = unframe(path, resume, me)
    try:
        pickled = resume or os.path.basename(path).startswith("checkpoint")
        saved = torch.load(io.BytesIO(content), weights_only=not pickled,
                           map_location=None if resume else "cpu")
        if not resume and "state" in saved:  # A checkpoint.pt evaluated: its agent's weights.
            saved.update(model=saved["state"]["agent"].state_dict(),
                         global_step=saved["state"]["global_step"])
        if not resume and saved.get("algorithm", saved["script"]) != script.ALGORITHM:
            fail(f"{path} was written by {saved['script']}.py, whose policy {me}.py cannot "
                 f"read: evaluate it with {saved['script']}.py")
        if (saved["script"] == me or not resume) and ("state" in saved or not resume):
            return saved
    except ModuleNotFoundError as error:  # The module of an env of your own, module:EnvId.
        fail(f"{path} needs the module {error.name}, which Python cannot import from here: run "
             "in its folder, or add that folder to PYTHONPATH")
    except AttributeError as error:  # A class renamed, or gone from its module.
        fail(f"{path} needs a class that Python cannot find ({error}): run the code that wrote it")
    except Exception:  # A pickle weights_only refuses, or another script's classes.
        pass
    what = f"checkpoint.pt of {me}.py" if resume else "model.pt or checkpoint.pt it can read"
    fail(f"{path} is no {what}: --resume takes <run>/checkpoint.pt of a run of the script given "
         "it, --eval-checkpoint <run>/model.pt (--save-model) or <run>/checkpoint.pt")


def saved_args(script, saved, path, resume):
    """The flags saved in a file, as RunArgs. A flag that the script has and the file lacks
    takes its default. One that the file has and the script lacks is ignored, or, for a --resume,
    refused. Each is named in one line, and so is the script that wrote the file if another."""
    me, RunArgs = name(script), run_args(script)
    if saved["script"] != me:  # A renamed copy of this script.
        say(f"note: {path} was written by {saved['script']}.py")
    names = {f.name for f in fields(RunArgs)}
    for key in sorted(saved["args"].keys() ^ names):  # Added to the script, or taken out of it.
        flag = f"--{key.replace('_', '-')}"
        if key in names:
            say(f"note: {path} has no {flag}: it takes its default, {getattr(RunArgs, key)}")
        elif resume:
            fail(f"--resume: {path} was trained with {flag}, which {me}.py lacks: resume "
                 "with the script that wrote it")
        else:
            say(f"note: {path} has {flag}, which {me}.py lacks: ignored")
    return RunArgs(**{k: v for k, v in saved["args"].items() if k in names})


def env_flags(script):
    """The flags that the script's `make_env` takes as keywords (ppo_atari.py's sticky_actions)."""
    keywords = inspect.signature(script.make_env).parameters
    return [f.name for f in fields(script.Args) if f.name in keywords and f.name != "env_id"]


def make_env(script, args, **kwargs):
    """The script's env for these flags: `make_env` gets each flag that it names as a keyword."""
    return script.make_env(args.env_id, **{key: getattr(args, key) for key in env_flags(script)},
                           **kwargs)


def evaluate(script, agent, args, folder, sampled=False):
    """Play --eval-episodes episodes, each to the env's own time limit (an env without one is cut
    at 10,000 steps), and print and return their returns. The agent acts through `greedy_action`,
    or with `sampled` through `sampled_action` (torch seeded with the episodes' seed), with its
    memory reset at each episode's start. A Box action is clipped to the env's bounds.
    --capture-video films the greedy episodes into <folder>/videos."""
    video = {"render_mode": "rgb_array"} if args.capture_video and not sampled else {}
    env = make_env(script, args, **video)
    if getattr(env.spec, "max_episode_steps", None) is None:  # Or it may be endless.
        env = gym.wrappers.TimeLimit(env, 10_000)
    if video:
        env = gym.wrappers.RecordVideo(env, f"{folder}/videos", lambda _: True)
    if isinstance(env.action_space, gym.spaces.Box):  # A mean may lie outside the bounds.
        env = gym.wrappers.ClipAction(env)
    env = gym.wrappers.RecordEpisodeStatistics(env, args.eval_episodes)  # Keeps every return.
    seed = args.seed + 10_000 if args.eval_seed is None else args.eval_seed
    act, how = (agent.sampled_action, "sampled") if sampled else (agent.greedy_action, "greedy")
    with torch.random.fork_rng():  # Training's random state is left as it was.
        torch.manual_seed(seed)
        play(env, act, args.eval_episodes, seed)
    env.close()
    print(f"{args.env_id}: mean return {np.mean(env.return_queue):.2f} ± "
          f"{np.std(env.return_queue):.2f} over {args.eval_episodes} {how} episodes (seed {seed})")
    return np.ravel(env.return_queue).tolist()  # Floats: a reward may be an array of one.


def play(env, act, episodes, seed):
    """Play `episodes` episodes with `act(obs, memory)`, saying every 5 s how far they are."""
    last_print = time.time()
    for episode in range(episodes):
        obs, _ = env.reset(seed=seed if episode == 0 else None)  # The first seed fixes them all.
        done, memory, steps = False, None, 0
        while not done:
            action, memory = act(obs, memory)
            obs, _, terminated, truncated, _ = env.step(action)
            done, steps = terminated or truncated, steps + 1
            if time.time() - last_print > 5:  # A long evaluation says how far it is.
                last_print = time.time()
                print(f"evaluating: episode {episode + 1}/{episodes}, {steps:,} steps played",
                      flush=True)


def load_agent(script, path, args=None):
    """The Agent saved in a model.pt (--save-model), for code of your own
    (docs/usage.md, "Long runs"), or in a checkpoint.pt. `args` are the flags to build it with,
    by default those saved with it. Act with `agent.greedy_action(obs, memory)`. model.pt's
    content holds "script", "algorithm", "model" (the state_dict), "args" (the flags, a dict) and
    "global_step"."""
    with named(script):
        saved = load(script, path, resume=False)
        args = args or saved_args(script, saved, path, resume=False)
    env = make_env(script, args)
    agent = script.make_agent(args, env.observation_space, env.action_space)
    agent.load_state_dict(saved["model"])
    return agent


def stopped(script, folder, why, code=1, resume=True):
    """Exit with one line: why the run stopped, and what is on disk. That is the --resume command
    where a checkpoint.pt exists (and `resume`), or else the files saved. Exit code 1 is an
    error's (`fail`), 130 and 143 the shell's for Ctrl-C and SIGTERM."""
    on_disk = sorted(glob.glob(f"{folder}/*.pt"))  # checkpoint.pt, then model.pt
    resume = resume and os.path.isfile(f"{folder}/checkpoint.pt")
    line = f"{why}; " + (f"--resume {folder}/checkpoint.pt goes on from its last checkpoint"
                         if resume else f"saved: {' and '.join(on_disk) or 'nothing'}")
    if code == 1:
        fail(line)
    say(f"{name(script)}.py: {line}")
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


def parse(script, args):
    """The run's flags: `args` from code of one's own (where the fields that differ from their
    defaults count as given), or else the command line. With --resume or --eval-checkpoint, the
    flags not given take the values saved in the file, and the file's content comes too. With
    --resume, a flag of `Args` that differs from the run's is refused, but for --total-timesteps:
    a larger one extends the run. With --eval-checkpoint, one that changes what the model means is
    refused (all of `Args` but --env-id, --seed, --num-threads, --cuda and the flags that
    `make_env` takes)."""
    RunArgs = run_args(script)
    cli, args = args is None, args or tyro.cli(RunArgs)
    path = args.resume or args.eval_checkpoint
    saved = path and load(script, path, resume=bool(args.resume))
    if saved:  # The file's flags, but for those given (not its --resume or --eval-checkpoint).
        old = dict(asdict(saved_args(script, saved, path, args.resume)), resume=None,
                   eval_checkpoint=None)
        args = (tyro.cli(RunArgs, default=RunArgs(**old)) if cli else RunArgs(
            **{k: old[k] if v == getattr(RunArgs, k) else v for k, v in asdict(args).items()}))
        allowed = (["total_timesteps"] if args.resume
                   else ["env_id", "seed", "num_threads", "cuda", *env_flags(script)])
        for key in [f.name for f in fields(script.Args) if getattr(args, f.name) != old[f.name]]:
            if key not in allowed:  # The model's meaning (--eval-checkpoint), or the run's.
                fail(f"{'--resume' if args.resume else '--eval-checkpoint'} takes the flags the "
                     f"file was trained with: leave out --{key.replace('_', '-')}")
    return args, saved, path


def main(script, args=None) -> dict:
    """Train `script` (a module), with the tooling around its `train`. Or go on with the run of a
    --resume checkpoint. Or evaluate the policy of an --eval-checkpoint file. `args` (its
    RunArgs, `run_args(script)`) come from code of one's own, or else from the command line
    (`parse`). Returns `train`'s state with the run's folder (run_dir), eval_returns and
    eval_sampled_returns. With --eval-checkpoint, it returns only those two."""
    with named(script):
        check_release(script)
        args, saved, path = parse(script, args)
        check_args(script, args)
        if args.eval_checkpoint:
            try:
                return evaluations(script, load_agent(script, path, args), args,
                                   os.path.dirname(path))
            except RuntimeError as error:  # Weights that do not fit: torch's line, first misfit.
                first = " ".join(str(error).split("\n\t")[:2])
                fail(f"--eval-checkpoint {path}: {first}")
        return Run(script, args, saved, path).train()


def evaluations(script, agent, args, folder):
    """The greedy evaluation's returns (eval_returns), and the sampled one's with --eval-sampled."""
    greedy = evaluate(script, agent, args, folder) if args.eval_episodes else []
    sampled = evaluate(script, agent, args, folder, sampled=True) if (
        args.eval_sampled and args.eval_episodes) else []
    return {"eval_returns": greedy, "eval_sampled_returns": sampled}


def lock(folder):
    """Lock the run's folder: a second run that writes it is refused. A new run in this process
    unlocks the last one's."""
    global LOCK
    if LOCK:
        LOCK.close()
    LOCK = open(f"{folder}/.lock", "a")
    fcntl.flock(LOCK, fcntl.LOCK_EX | fcntl.LOCK_NB)


class Run:
    """One training run of a script: its folder, its TensorBoard writer and the files it saved.
    `train` runs the script's `train` with `hook`, which resumes, guards and saves."""

    def __init__(self, script, args, saved, path):
        self.script, self.args, self.saved, self.path = script, args, saved, path
        self.updates, self.written = 0, {}  # written: each file this run saved, and its step
        # Each run gets its own folder, even where another run took its name. A resumed run
        # reopens its checkpoint's folder. There TensorBoard drops what was logged after the
        # checkpoint, and the run logs it again.
        # The env id without the module of module:EnvId, and one folder: no ':' or '/' in it.
        env_name = re.sub(r"[^\w.-]", "-", args.env_id.rpartition(":")[2])
        run_name = f"{env_name}__{args.exp_name}__{args.seed}__{int(time.time())}"
        self.folder = (os.path.dirname(os.path.abspath(path)) if saved
                       else f"{args.log_dir}/{run_name}")
        try:
            try:
                os.makedirs(self.folder, exist_ok=bool(saved))
            except FileExistsError:  # A run started in the same second.
                self.folder = tempfile.mkdtemp(prefix=run_name + "_", dir=args.log_dir)
            lock(self.folder)
        except BlockingIOError:
            fail(f"{self.folder} is in use by another run; wait for it to end, or resume a copy "
                 "of it")
        except OSError as error:  # Before training: the folder cannot be made or written.
            fail(f"cannot write the run folder {self.folder}: {error.strerror}; give a --log-dir "
                 "you can write")
        if args.track:  # Before the writer: W&B mirrors what it writes.
            import wandb
            run_name = os.path.basename(self.folder)
            wandb.init(project=args.wandb_project_name, entity=args.wandb_entity, name=run_name,
                       id=run_name, config=asdict(args), resume="allow", dir=self.folder,
                       sync_tensorboard=True)
        self.logs = set(glob.glob(f"{self.folder}/events.*"))
        # TensorBoard's writing thread meets an OSError of the folder first. It passes it on to
        # the next log call, which stops the run in one line, so the thread need not print it.
        threading.excepthook = lambda hook: issubclass(hook.exc_type, OSError) or (
            threading.__excepthook__(hook))
        self.writer = SummaryWriter(self.folder,
                                    purge_step=saved and saved["state"]["global_step"] + 1)

    def refuse(self, message):
        """Refuse a --resume, leaving its folder as it was: no new log file."""
        self.writer.close()
        for new in set(glob.glob(f"{self.folder}/events.*")) - self.logs:
            os.remove(new)
        fail(message)

    def start(self, state):
        """Put the --resume checkpoint's state in place of the new one, by name, guard the envs,
        and return the state to go on with."""
        saved, args = self.saved, self.args
        differ = saved and (set(state) ^ set(saved["state"])) - {"envs", "next_obs"}
        if differ:  # The envs may be left out: see `save`.
            self.refuse(f"--resume: the names {sorted(differ)} are in one of {self.path} and "
                        "train's state(), not in both: resume with the code that wrote it")
        state.update(saved["state"] if saved else {})
        if saved and "envs" not in saved["state"]:  # Envs not saved: see `save`.
            say(f"note: {args.env_id} cannot be saved mid-episode, so the run goes on with "
                "new episodes, not exactly as if never stopped")
        state["envs"] = EnvGuard(state["envs"])
        return state

    def hook(self, state, losses=None):
        """`train`'s hook. At its start (no `losses`): `start`. After each update: stop on a NaN
        or inf loss or weight, warn of a collapsed policy, save every --checkpoint-every updates,
        and stop on a signal whose KeyboardInterrupt was lost."""
        if losses is None:
            return self.start(state)
        weights = torch.nn.utils.parameters_to_vector(state["agent"].parameters()).detach()
        if not np.isfinite(sum(losses.values()) + weights.sum().item()):
            raise FloatingPointError("a loss or weight became NaN or inf in an update: a learning "
                                     "rate too large? rewards of huge scale?")
        # A collapse: the update's logged KL estimate (approx_kl) is above 1 nat, far above the
        # 0.01 to 0.05 that --target-kl typically allows. With `get`, a statistic renamed in
        # `train` turns the check off and never breaks the run.
        if losses.get("approx_kl", 0) > 1:
            say(f"warning: the policy collapsed at step {state['global_step']:,}: a KL of "
                f"{losses['approx_kl']:.3g} nats in one update (entropy now "
                f"{losses.get('entropy', np.nan):.3g}); a step size too large?")
        self.updates += 1
        if self.args.checkpoint_every and self.updates % self.args.checkpoint_every == 0:
            self.save(state)
        came = getattr(signal.getsignal(signal.SIGINT), "came", False)  # `interrupt`, installed
        if came:  # A signal came, and its KeyboardInterrupt was lost (in torch.save's pickler).
            raise KeyboardInterrupt(came)

    def cannot_write(self, error, when):
        """`stopped`'s line for an OSError: what failed, and the step of each file that this run
        saved and that is still on disk."""
        on_disk = ", ".join(f"{file} of step {step:,}" for file, step in self.written.items()
                            if os.path.isfile(f"{self.folder}/{file}"))
        return (f"cannot write {self.folder}: {error.strerror}, {when}"
                + (on_disk and f" ({on_disk})"))

    def save(self, state):
        """Write model.pt (with --save-model) and checkpoint.pt (with --checkpoint-every), and
        flush the logs. checkpoint.pt holds `train`'s state by its names, and the flags. EzPickle
        envs (Box2D, MuJoCo, ALE) pickle only the arguments that made them. They are kept only
        where a wrapper defines `pickles_state` and pickles their state. Otherwise they are left
        out with their observations, as are envs that do not pickle at all (a lambda in a
        wrapper), and a resumed run begins new episodes."""
        args, folder = self.args, self.folder
        files = {"script": name(self.script), "algorithm": self.script.ALGORITHM,
                 "args": asdict(args)}
        self.writer.flush()
        if args.save_model:  # Only tensors, numbers, strings: safe to load.
            write(dict(files, model=state["agent"].state_dict(), global_step=state["global_step"]),
                  f"{folder}/model.pt")
            self.written["model.pt"] = state["global_step"]
        if not args.checkpoint_every:
            return
        envs = state["envs"].env  # Without the EnvGuard.
        without_envs = {k: v for k, v in state.items() if k not in ("envs", "next_obs")}
        first = envs.unwrapped.envs[0]
        exact = first.has_wrapper_attr("pickles_state") or not isinstance(
            first.unwrapped, gym.utils.EzPickle)
        for kept in [dict(state, envs=envs)] * exact + [without_envs]:
            try:  # Without the envs where they do not pickle.
                write(dict(files, state=kept), f"{folder}/checkpoint.pt")
                self.written["checkpoint.pt"] = state["global_step"]
                return
            except OSError:  # A full disk: `Run.train` stops the run and says what is on disk.
                raise
            except Exception as error:  # An object that does not pickle: a lambda, a local class.
                failure = error
        args.checkpoint_every = 0  # Said once: the run goes on without checkpoints.
        say(f"warning: no checkpoint: {failure}")

    def train(self):
        """Train, then save and evaluate. A guard rail or a Ctrl-C stops the run at once. Its
        checkpoint.pt and model.pt are then those of its last checkpoint, if any, whose weights
        are finite. Its logs reach at least that far, and a --resume drops what was logged after
        it. After training, the files are written (as --checkpoint-every and --save-model ask),
        and the policy is evaluated."""
        script, args, folder = self.script, self.args, self.folder
        try:
            state = script.train(args, self.writer, self.hook)
        except FloatingPointError as error:  # A guard rail: the env's step, a NaN or inf.
            stopped(script, folder, f"{args.env_id}: {error}, in training")
        except OSError as error:  # Mostly the run folder, deleted or full.
            stopped(script, folder, self.cannot_write(error, "in training"))
        except KeyboardInterrupt as error:  # Ctrl-C or SIGTERM (`interrupt`)
            stopped(script, folder, *interrupted(error, "in training"))
        if self.saved and not self.updates:
            self.refuse(f"--resume: the run has trained its {state['global_step']:,} steps; give a "
                        "larger --total-timesteps")
        try:
            self.save(state)
            if args.save_model:
                print(f"model saved to {folder}/model.pt")
            returns = evaluations(script, state["agent"].cpu(), args, folder)
        except KeyboardInterrupt as error:
            stopped(script, folder, *interrupted(error, "after training (saving or evaluating)"),
                    resume=False)
        except OSError as error:
            stopped(script, folder, self.cannot_write(error, "after training"))
        for key, tag in (("eval_returns", "eval/episodic_return"),
                         ("eval_sampled_returns", "eval/sampled_episodic_return")):
            for episode_return in returns[key]:  # At the step of the policy evaluated.
                self.writer.add_scalar(tag, episode_return, state["global_step"])
        self.writer.close()
        LOCK.close()
        return dict(state, run_dir=folder, **returns)


def cli(path):
    """The command line of the script at `path`: `main`, with Ctrl-C and SIGTERM answered in one
    line. The script runs as the module named after its file, not as __main__. A checkpoint then
    names its classes by the file's name, so code of one's own that imports the script loads it."""
    signal.signal(signal.SIGINT, interrupt)
    signal.signal(signal.SIGTERM, interrupt)
    script_name = os.path.basename(path).removesuffix(".py")
    try:  # sys.path[0] is the script's folder
        main(importlib.import_module(script_name))
    except KeyboardInterrupt as error:  # Before training, or in an --eval-checkpoint evaluation.
        why, code = interrupted(error, "before training or in an evaluation")
        say(f"{script_name}.py: {why}: no model.pt or checkpoint.pt was saved")
        raise SystemExit(code) from None
