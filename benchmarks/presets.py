"""The benchmark matrix: which script runs on which env, with which flags and seeds.

Every script keeps its own defaults; only the flags that an env needs are written here, so the
exact command of each run is `python <script>.py --env-id <env> --seed <seed> <flags>`. A suite is
a list of cells (script, env, flags, seeds); `run.py --suite NAME` runs every (cell, seed).
"""

# LunarLander: the CartPole defaults are too small. The RL Baselines3 Zoo's γ 0.999, λ 0.98 and
# minibatches of 64, with 8 envs × 256 steps and 10 epochs (the Zoo's 16 × 1024 steps with 4 epochs
# reached only ~90 by 700k steps here).
LUNAR_PPO = ["--total-timesteps", "1000000", "--num-envs", "8", "--num-steps", "256", "--num-minibatches", "32",
             "--update-epochs", "10", "--learning-rate", "3e-4", "--gamma", "0.999", "--gae-lambda", "0.98"]
MILLION = ["--total-timesteps", "1000000"]
FIVE_SEEDS, THREE_SEEDS = [1, 2, 3, 4, 5], [1, 2, 3]

SUITES = {
    # Every script for a few updates on its smallest env: a check that the whole pipeline runs.
    "smoke": [
        ("ppo_discrete", "CartPole-v1", ["--total-timesteps", "1024", "--eval-episodes", "1"], [1]),
        ("ppo_continuous", "Pendulum-v1", ["--total-timesteps", "1024", "--num-steps", "512", "--num-minibatches", "8",
                                           "--update-epochs", "2", "--eval-episodes", "1"], [1]),
        ("vpg", "CartPole-v1", ["--total-timesteps", "2048", "--num-steps", "256", "--vf-iters", "5",
                                "--eval-episodes", "1"], [1]),
        ("reinforce", "CartPole-v1", ["--total-timesteps", "2048", "--batch-size", "500", "--eval-episodes", "1"], [1]),
        ("trpo", "CartPole-v1", ["--total-timesteps", "2048", "--num-steps", "256", "--vf-iters", "5",
                                 "--eval-episodes", "1"], [1]),
    ],
    # Classic control: each script's own defaults on CartPole-v1 (500k steps each), 1M steps on
    # LunarLander.
    "classic": [
        ("ppo_discrete", "CartPole-v1", [], FIVE_SEEDS),
        ("reinforce", "CartPole-v1", [], FIVE_SEEDS),
        ("vpg", "CartPole-v1", [], FIVE_SEEDS),
        ("ppo_discrete", "LunarLander-v3", LUNAR_PPO + ["--ent-coef", "0.01"], FIVE_SEEDS),
        ("ppo_continuous", "LunarLanderContinuous-v3", LUNAR_PPO, FIVE_SEEDS),
        ("vpg", "LunarLander-v3", MILLION, FIVE_SEEDS),
        ("reinforce", "LunarLander-v3", MILLION, FIVE_SEEDS),
        ("trpo", "CartPole-v1", [], FIVE_SEEDS),
        ("trpo", "LunarLander-v3", MILLION, FIVE_SEEDS),
    ],
    # MuJoCo at 1M steps. PPO gets 5 seeds on HalfCheetah and Hopper, where single seeds can stall
    # in a poor local optimum (a Hopper that falls after ~300 steps) and the spread across seeds is large.
    "mujoco": [
        ("ppo_continuous", "HalfCheetah-v4", [], FIVE_SEEDS),
        ("ppo_continuous", "Hopper-v4", [], FIVE_SEEDS),
        ("ppo_continuous", "Walker2d-v4", [], THREE_SEEDS),
        ("vpg", "HalfCheetah-v4", MILLION, THREE_SEEDS),
        ("vpg", "Hopper-v4", MILLION, THREE_SEEDS),
        ("vpg", "Walker2d-v4", MILLION, THREE_SEEDS),
        ("reinforce", "HalfCheetah-v4", MILLION, THREE_SEEDS),
        ("reinforce", "Hopper-v4", MILLION, THREE_SEEDS),
        ("reinforce", "Walker2d-v4", MILLION, THREE_SEEDS),
        ("trpo", "HalfCheetah-v4", MILLION, THREE_SEEDS),
        ("trpo", "Hopper-v4", MILLION, THREE_SEEDS),
        ("trpo", "Walker2d-v4", MILLION, THREE_SEEDS),
    ],
}

# The PPO paper's Figure 3 (Schulman et al. 2017): seven MuJoCo envs at 1M steps, 3 seeds, one
# curve per algorithm of the reading order, each script at its own defaults (trpo.py's cells last:
# it joined the suite after the others had started). The cells it shares with the mujoco suite
# are the same runs (same ids), so they are reused, not rerun. The last two
# PPO cells complete CleanRL's published v4 table (InvertedPendulum is among the seven). Pusher-v4
# needs mujoco<3, which requirements.txt does not install (see RESULTS.md).
FIGURE3_ENVS = ["HalfCheetah-v4", "Hopper-v4", "InvertedDoublePendulum-v4", "InvertedPendulum-v4",
                "Reacher-v4", "Swimmer-v4", "Walker2d-v4"]
SUITES["figure3"] = (
    [("ppo_continuous", env_id, [], THREE_SEEDS) for env_id in FIGURE3_ENVS]
    + [("ppo_continuous", env_id, [], THREE_SEEDS) for env_id in ("Humanoid-v4", "Pusher-v4")]
    + [(script, env_id, MILLION, THREE_SEEDS) for script in ("vpg", "reinforce") for env_id in FIGURE3_ENVS]
    + [("trpo", env_id, MILLION, THREE_SEEDS) for env_id in FIGURE3_ENVS]
)

# vpg.py at Spinning Up's policy step size (pi_lr 3e-4, a tenth of reinforce.py's 3e-3) on the
# figure3 envs: the runs that made 3e-3 vpg.py's default (RESULTS.md). They were made when 3e-4
# was the default, as the figure3 cells without --learning-rate; their resolved flags are these.
SUITES["figure3-vpg-lr"] = [("vpg", env_id, MILLION + ["--learning-rate", "3e-4"], THREE_SEEDS, "pi-lr-3e-4")
                            for env_id in FIGURE3_ENVS]

# CleanRL's published v4 table came from mujoco 2 (its benchmark predates mujoco 3). The same
# ppo_continuous cells on mujoco 2.3.7, so that "above" or "below" CleanRL is measured on its
# simulator; the variant names the version, and run.py refuses these runs on any other.
CLEANRL_MUJOCO2 = ["HalfCheetah-v4", "Walker2d-v4", "Hopper-v4", "InvertedPendulum-v4", "Humanoid-v4"]
SUITES["cleanrl-mujoco2"] = [("ppo_continuous", env_id, [], THREE_SEEDS, "mujoco-2.3.7") for env_id in CLEANRL_MUJOCO2]

# reinforce.py's rollout stores every step of the N envs time-major, with a mask of the steps that
# enter the batch, where it kept per-env episode lists: the batch holds its steps in another order
# (and the rule that stops new episodes counts the steps of unfinished ones too), so later bits
# differ. The classic reinforce cells again with the new rollout, to compare with their runs made
# before it (RESULTS.md).
SUITES["reinforce-rollout"] = [("reinforce", "CartPole-v1", [], FIVE_SEEDS, "time-major"),
                               ("reinforce", "LunarLander-v3", MILLION, FIVE_SEEDS, "time-major")]

# trpo.py's conjugate gradient stops once rᵀr < 1e-10 (as Baselines' and SB3-contrib's do); before,
# it always ran 10 iterations, which on CartPole reach 1e-20 and changed later bits. The classic
# trpo cells again with that stop, to compare with their runs made before it (RESULTS.md).
SUITES["trpo-cg-stop"] = [("trpo", "CartPole-v1", [], FIVE_SEEDS, "cg-stop"),
                          ("trpo", "LunarLander-v3", MILLION, FIVE_SEEDS, "cg-stop")]

# trpo.py against the RL Zoo's TRPO on MuJoCo: the Zoo's batch (2 envs × 1024 steps, so 488 updates
# in 1M steps instead of 250) and λ 0.95, everything else at trpo.py's defaults, on seed 1. Its other
# difference, VecNormalize, is measured by benchmarks/trpo_normalized.py. See results_notes.md.
ZOO_TRPO = ["--num-envs", "2", "--num-steps", "1024", "--gae-lambda", "0.95"]
SUITES["trpo-zoo"] = [("trpo", env_id, MILLION + ZOO_TRPO, [1], "zoo-batch")
                      for env_id in ("Hopper-v4", "HalfCheetah-v4", "Walker2d-v4")]

# The ablations (benchmarks/ABLATIONS.md): each cell switches one detail of the PPO scripts off,
# and its variant name (the fifth item) goes into the run id, so that it never collides with the
# default run of the same seed. A cell without a variant is the default it is compared with: the
# same command as a run of the classic or mujoco suite, so those finished runs are reused.
PENDULUM = ["--total-timesteps", "300000"]  # every Pendulum episode is truncated at 200 steps
DETAILS = ["--no-bootstrap-truncation", "--no-norm-obs", "--no-norm-reward"]
ABLATIONS = (  # the truncation cells first: they are the ones that every env gets
    [("ppo_continuous", "Pendulum-v1", PENDULUM, FIVE_SEEDS),
     ("ppo_continuous", "Pendulum-v1", PENDULUM + [DETAILS[0]], FIVE_SEEDS, DETAILS[0][2:]),
     ("ppo_discrete", "CartPole-v1", [], FIVE_SEEDS),
     ("ppo_discrete", "CartPole-v1", [DETAILS[0]], FIVE_SEEDS, DETAILS[0][2:])]
    + [cell for env_id in ("Hopper-v4", "HalfCheetah-v4", "Walker2d-v4") for cell in (
        ("ppo_continuous", env_id, [], THREE_SEEDS),
        ("ppo_continuous", env_id, [DETAILS[0]], THREE_SEEDS, DETAILS[0][2:]))]
    + [(script, env_id, flags + [flag], seeds, flag[2:]) for flag in DETAILS[1:]
       for script, env_id, flags, seeds in [("ppo_continuous", "Pendulum-v1", PENDULUM, FIVE_SEEDS),
                                            ("ppo_continuous", "Hopper-v4", [], THREE_SEEDS)]]
)
# Value clipping (core detail 9), which Engstrom et al. (2020) and Andrychowicz et al. (2021) found
# not to help: on CartPole-v1 (returns unscaled, so ε = 0.2 bounds each change of V to 0.2 reward
# units), Pendulum-v1 and Hopper-v4 (rewards scaled).
ABLATIONS += [("ppo_discrete", "CartPole-v1", ["--no-clip-vloss"], FIVE_SEEDS, "no-clip-vloss"),
              ("ppo_continuous", "Pendulum-v1", PENDULUM + ["--no-clip-vloss"], FIVE_SEEDS, "no-clip-vloss"),
              ("ppo_continuous", "Hopper-v4", ["--no-clip-vloss"], THREE_SEEDS, "no-clip-vloss")]
SUITES["ablations"] = ABLATIONS

# Side by side with CleanRL (issue 59): its ppo_continuous_action.py (run.py's CLEANRL, at a pinned
# commit with reference_runs/'s patch) and ppo_continuous.py, each at its own defaults, on the same
# machine and simulator (gymnasium 1.4, mujoco 4), 1M steps, seeds 1-10; and ours without the
# truncation bootstrap on HalfCheetah. Seed by seed across the cells, so that a suite cut short
# has the same seeds on both sides. Our cells share their ids with the mujoco and ablations suites,
# whose finished runs (the same command) are reused.
SIDE_BY_SIDE_ENVS = ["HalfCheetah-v4", "Walker2d-v4", "Hopper-v4"]
SUITES["side-by-side"] = [
    cell for seed in range(1, 11) for env_id in SIDE_BY_SIDE_ENVS for cell in (
        ("cleanrl_ppo_continuous_action", env_id, [], [seed]), ("ppo_continuous", env_id, [], [seed]))
] + [("ppo_continuous", "HalfCheetah-v4", [DETAILS[0]], [seed], DETAILS[0][2:]) for seed in range(1, 11)]

# Memory (issue 57): ppo_recurrent.py at its defaults (RL Zoo's CartPoleNoVel-v1 settings, 99,840
# steps) on CartPoleNoVel-v1, and the feed-forward ppo_discrete.py on the same env and budget, so
# that the table shows what memory buys. ppo_discrete.py makes the env through ppo_recurrent.py,
# which registers it (module:EnvId).
# The other NoVel envs take the settings RL Zoo tuned for them (rl-baselines3-zoo
# hyperparams/ppo_lstm.yml), with one translation. RL Zoo cuts each batch into minibatches of
# 128 (Pendulum) or 256 (MountainCar) steps. A minibatch here is whole env sequences, so the same
# batch is collected by more envs over fewer steps: 32 envs × 128 steps in place of 4 × 1,024
# (Pendulum), 64 × 128 in place of 8 × 1,024 (MountainCar). The batch, the minibatch size and the
# number of gradient steps per update are then RL Zoo's. Also:
# - SB3's vf_coef weighs (V - R)^2 and ours ½(V - R)^2, so RL Zoo's 0.19 is 0.38 here;
# - RL Zoo's budget rounded up to whole batches, as SB3 does: 102,400 and 303,104 steps;
# - RL Zoo uses gSDE on both (state-dependent exploration noise), which ppo_recurrent.py lacks.
# The feed-forward ppo_continuous.py runs on each with the same flags and budget.
RECURRENT_PENDULUM = ["--num-envs", "32", "--num-steps", "128", "--num-minibatches", "32",
                      "--update-epochs", "10", "--gamma", "0.9", "--gae-lambda", "0.95",
                      "--ent-coef", "0", "--learning-rate", "1e-3", "--no-anneal-lr",
                      "--total-timesteps", "102400"]
RECURRENT_MOUNTAINCAR = ["--num-envs", "64", "--num-steps", "128", "--num-minibatches", "32",
                         "--update-epochs", "10", "--gamma", "0.9999", "--gae-lambda", "0.9",
                         "--learning-rate", "7.77e-5", "--no-anneal-lr", "--ent-coef", "0.00429",
                         "--clip-coef", "0.1", "--max-grad-norm", "5", "--vf-coef", "0.38",
                         "--total-timesteps", "303104"]
# LunarLanderNoVel-v3 has no RL Zoo figure: the feed-forward LunarLander-v3 settings above
# (LUNAR_PPO: batches of 2,048 steps in 32 minibatches of 64), collected the same way by 32 envs ×
# 64 steps, on half their budget (499,712 steps, 244 batches). ppo_discrete.py runs beside it with
# the same flags.
LUNAR_HALF = ["--total-timesteps", "499712", "--num-envs", "32", "--num-steps", "64",
              "--num-minibatches", "32", "--update-epochs", "10", "--learning-rate", "3e-4",
              "--gamma", "0.999", "--gae-lambda", "0.98", "--ent-coef", "0.01"]
SUITES["recurrent"] = [
    ("ppo_recurrent", "CartPoleNoVel-v1", [], FIVE_SEEDS),
    ("ppo_discrete", "ppo_recurrent:CartPoleNoVel-v1", ["--total-timesteps", "99840"], FIVE_SEEDS),
    ("ppo_recurrent", "PendulumNoVel-v1", RECURRENT_PENDULUM, FIVE_SEEDS),
    ("ppo_continuous", "ppo_recurrent:PendulumNoVel-v1", RECURRENT_PENDULUM, FIVE_SEEDS),
    ("ppo_recurrent", "MountainCarContinuousNoVel-v0", RECURRENT_MOUNTAINCAR + ["--hidden-size", "32"],
     FIVE_SEEDS),
    ("ppo_continuous", "ppo_recurrent:MountainCarContinuousNoVel-v0", RECURRENT_MOUNTAINCAR,
     FIVE_SEEDS),
    ("ppo_recurrent", "LunarLanderNoVel-v3", LUNAR_HALF, FIVE_SEEDS),
    ("ppo_discrete", "ppo_recurrent:LunarLanderNoVel-v3", LUNAR_HALF, FIVE_SEEDS),
]

# RL Zoo's RecurrentPPO (sb3-contrib, RL Zoo's tuned settings; rl-baselines3-zoo benchmark.md): one
# trained agent each, deterministic evaluation. Its Pendulum and MountainCar settings use gSDE,
# which ppo_recurrent.py does not have.
RL_ZOO_RECURRENT = {"CartPoleNoVel-v1": "500.0 ± 0.0 at 100k", "PendulumNoVel-v1": "-217.9 ± 140.1 at 100k (gSDE)",
                    "MountainCarContinuousNoVel-v0": "91.5 ± 1.8 at 300k (gSDE)"}

# Published figures to print beside ours (see RESULTS.md for the metric of each source).
REFERENCES = {
    ("ppo_discrete", "CartPole-v1"): "CleanRL ppo.py 490.04 ± 6.12 at 500k (last-100 training mean, 3 seeds)",
    ("ppo_discrete", "LunarLander-v3"): "SB3 Zoo PPO 242.1 ± 31.8 (one agent, deterministic eval, LunarLander-v2)",
    ("ppo_continuous", "HalfCheetah-v4"): "CleanRL 1442.64 ± 46.03 at 1M (3 seeds)",
    ("ppo_continuous", "Hopper-v4"): "CleanRL 2382.86 ± 271.74 at 1M (3 seeds); its script gave 2012 ± 128 here (seeds 1-3)",
    ("ppo_continuous", "Walker2d-v4"): "CleanRL 2287.95 ± 571.78 at 1M (3 seeds)",
    ("vpg", "HalfCheetah-v4"): "Spinning Up VPG ~-50 at 1M, ~630 at 3M (HalfCheetah-v3, read off its figure)",
    ("vpg", "Hopper-v4"): "Spinning Up VPG ~390 at 1M, ~815 at 3M (Hopper-v3, read off its figure)",
    ("vpg", "Walker2d-v4"): "Spinning Up VPG ~290 at 1M, ~470 at 3M (Walker2d-v3, read off its figure)",
    ("trpo", "CartPole-v1"): "SB3-contrib TRPO (RL Zoo) 500 at 100k (one agent, deterministic eval)",
    ("trpo", "HalfCheetah-v4"): "SB3-contrib TRPO (RL Zoo) 1785 ± 69 at 1M (one agent, deterministic eval, -v3)",
    ("trpo", "Hopper-v4"): "SB3-contrib TRPO (RL Zoo) 3618 ± 357 at 1M (one agent, deterministic eval, -v3)",
    ("trpo", "Walker2d-v4"): "SB3-contrib TRPO (RL Zoo) 4933 ± 1453 at 1M (one agent, deterministic eval, -v3)",
}
REFERENCES.update({
    ("ppo_continuous", "InvertedPendulum-v4"): "CleanRL 963.09 ± 22.20 at 1M (3 seeds)",
    ("ppo_continuous", "Humanoid-v4"): "CleanRL 716.11 ± 49.08 at 1M (3 seeds); its script gave 643 ± 14 here (seeds 1-3)",
    ("ppo_continuous", "Pusher-v4"): "CleanRL -40.38 ± 7.15 at 1M (3 seeds)",
})

# Beside the figure3 table. CleanRL's published v4 figures (docs/benchmark/ppo_continuous_action.md:
# 1M steps, 3 seeds, last-100 training mean, our metric): the envs it publishes. The PPO paper
# prints no numbers for its Figure 3 (-v1 envs, 1M steps, 3 seeds), only curves; these are the
# approximate readings of its PPO (Clip), TRPO and A2C curves that Tianshou transcribed into its
# MuJoCo benchmark table (thu-ml/tianshou docs/tutorials/benchmark.rst; "~": read from the plots,
# the best average return within 1M steps). Its "Vanilla PG, Adaptive" curve is not among them.
CLEANRL_V4 = {"HalfCheetah-v4": (1442.64, 46.03), "Hopper-v4": (2382.86, 271.74), "Walker2d-v4": (2287.95, 571.78),
              "InvertedPendulum-v4": (963.09, 22.20), "Humanoid-v4": (716.11, 49.08), "Pusher-v4": (-40.38, 7.15)}
PPO_PAPER_FIGURE3 = {  # env: (PPO-clip, TRPO, A2C)
    "HalfCheetah-v4": ("~1800", "~0", "~1000"), "Hopper-v4": ("~2330", "~2100", "~900"),
    "InvertedDoublePendulum-v4": ("~8000", "~200", "~7100"), "InvertedPendulum-v4": ("~1000", "~1000", "~1000"),
    "Reacher-v4": ("~-7", "~-115", "~-24"), "Swimmer-v4": ("~108", "~121", "~31"),
    "Walker2d-v4": ("~3460", "~1100", "~850")}

# The MinAtar paper (Young and Tian 2019) publishes curves only: the moving average of the last 100
# training episodes (the figure's y-axis label), the mean of 30 runs, on the v0 games (all 6
# actions; MinAtar <= 1.0.10 for Seaquest). These are readings of its learning-curve figure
# (kenjyoung/MinAtar img/learning_curves.gif, last changed in 87c2bc8) at 2M frames, our budget, and
# at its 5M: the median row of each curve's pixels over a few columns at that x, mapped through the
# axis ticks. A MinAtar step is one frame.
MINATAR_PAPER = {  # game: {curve: (at 2M frames, at 5M frames)}
    "Asterix-v1": {"DQN": ("~14", "~17"), "AC(0.8)": ("~6", "~19")},
    "Breakout-v1": {"DQN": ("~10", "~10"), "AC(0.8)": ("~14", "~18")},
    "Freeway-v1": {"DQN": ("~51", "~50"), "AC(0.8)": ("~15", "~48")},
    "Seaquest-v1": {"DQN": ("~5", "~20"), "AC(0.8)": ("~2", "~16")},
    "SpaceInvaders-v1": {"DQN": ("~42", "~43"), "AC(0.8)": ("~106", "~186")},
}

# Pixels (issue 71). MinAtar: ppo_atari.py at its defaults (the PPO paper's Atari settings) on the
# five games, 2M steps (1,953 batches of 1,024) and 3 seeds each. Beside it, ppo_discrete.py on the
# same frames flattened into vectors (benchmarks/flat_minatar.py), with the same batches, epochs,
# clip and loss weights and two hidden layers of 128 units. It cannot decay ε as ppo_atari.py does.
MINATAR_GAMES = ["Asterix", "Breakout", "Freeway", "Seaquest", "SpaceInvaders"]
TWO_MILLION = ["--total-timesteps", "2000000"]
FLAT_AS_ATARI = TWO_MILLION + ["--num-envs", "8", "--num-steps", "128", "--update-epochs", "3",
                               "--clip-coef", "0.1", "--vf-coef", "1.0", "--hidden-size", "128"]
SUITES["minatar"] = (
    [("ppo_atari", f"MinAtar/{game}-v1", TWO_MILLION, THREE_SEEDS) for game in MINATAR_GAMES]
    + [("ppo_discrete", f"benchmarks.flat_minatar:MinAtarFlat/{game}-v1", FLAT_AS_ATARI, THREE_SEEDS)
       for game in MINATAR_GAMES])
# Atari at 2M frames (500k steps), 2 seeds, with CleanRL's ppo_atari.py settings (ppo2's): 4
# epochs, c₁ 0.5, a constant ε, for the side-by-side with CleanRL's file on this machine.
CLEANRL_ATARI = ["--total-timesteps", "500000", "--update-epochs", "4", "--vf-coef", "0.5",
                 "--no-anneal-clip"]
SUITES["atari"] = [cell for game in ("Breakout", "Pong") for cell in (
    ("ppo_atari", f"ALE/{game}-v5", CLEANRL_ATARI, [1, 2]),
    ("cleanrl_ppo_atari", f"{game}NoFrameskip-v4", ["--total-timesteps", "500000"], [1, 2]))]

# Memory on and off at the same settings (issue 72): the recurrent step's figure. ppo_recurrent.py
# at its defaults without its two normalisers, which ppo_discrete.py lacks, and ppo_discrete.py
# with every flag the two share set to ppo_recurrent.py's defaults. The networks still differ:
# an LSTM of 64 units and a ReLU layer against two tanh layers of 64.
RECURRENT_SETTINGS = ["--total-timesteps", "99840", "--learning-rate", "1e-3", "--update-epochs", "20",
                      "--num-minibatches", "1", "--no-clip-vloss", "--ent-coef", "0", "--num-envs", "8",
                      "--num-steps", "32", "--gamma", "0.98", "--gae-lambda", "0.8"]
SUITES["memory"] = [
    ("ppo_recurrent", "CartPoleNoVel-v1", ["--no-norm-obs", "--no-norm-reward"], FIVE_SEEDS, "no-normalisers"),
    ("ppo_discrete", "ppo_recurrent:CartPoleNoVel-v1", RECURRENT_SETTINGS, FIVE_SEEDS, "recurrent-settings"),
]

# MinAtar settings from published PPO work on MinAtar (issue 77; benchmarks/minatar_sources.md),
# scaled to a 2-core machine: 64 envs × 128 steps a batch (8,192 steps) in place of Pgx's 4,096
# envs. "pgx" keeps Pgx's minibatch of 4,096 steps and so its steps per gradient step (3 epochs of
# 2 minibatches); "gymnax" takes gymnax-blines' batch, 8 minibatches, 4 epochs, α 5e-4 and
# γ 0.999; "gymnax-gamma-0.99" is gymnax with Pgx's γ. These keep α and ε constant, with c₁ 0.5
# and c₂ 0.01. Two games, seeds 1 and 2, at 2M steps: the small sweep that chose MINATAR below.
MINATAR_PGX = ["--num-envs", "64", "--num-steps", "128", "--num-minibatches", "2", "--update-epochs", "3",
               "--learning-rate", "3e-4", "--no-anneal-lr", "--no-anneal-clip", "--clip-coef", "0.2",
               "--vf-coef", "0.5", "--ent-coef", "0.01", "--gamma", "0.99", "--gae-lambda", "0.95"]
MINATAR_GYMNAX = ["--num-envs", "64", "--num-steps", "128", "--num-minibatches", "8", "--update-epochs", "4",
                  "--learning-rate", "5e-4", "--no-anneal-lr", "--no-anneal-clip", "--clip-coef", "0.2",
                  "--vf-coef", "0.5", "--ent-coef", "0.01", "--gamma", "0.999", "--gae-lambda", "0.95"]
MINATAR_TUNE = {"pgx": MINATAR_PGX, "gymnax": MINATAR_GYMNAX,
                "gymnax-gamma-0.99": MINATAR_GYMNAX[:-4] + ["--gamma", "0.99", "--gae-lambda", "0.95"]}
SUITES["minatar-tune"] = [("ppo_atari", f"MinAtar/{game}-v1", TWO_MILLION + flags, [1, 2], name)
                          for game in ("Breakout", "SpaceInvaders") for name, flags in MINATAR_TUNE.items()]

# MinAtar at the MinAtar paper's horizon: ppo_atari.py at the settings the sweep above chose
# (RESULTS.md gives its table), gymnax-blines' batch, epochs and α with Pgx's γ 0.99. It ended
# highest on SpaceInvaders and level with "gymnax" on Breakout. 5M steps, seeds 1-10, seed by seed
# across the games, so that a suite cut short has the same seeds on every game. --eval-sampled
# adds an evaluation with sampled actions, the one that Pgx and gymnax-blines report. Sticky
# actions: MinAtar's default, 0.1. The variant "5m" keeps the run ids apart from the minatar
# suite's 2M runs of the same seeds.
MINATAR = MINATAR_TUNE["gymnax-gamma-0.99"]
SUITES["minatar-5m"] = [("ppo_atari", f"MinAtar/{game}-v1",
                         ["--total-timesteps", "5000000", "--eval-sampled", *MINATAR], [seed], "5m")
                        for seed in range(1, 11) for game in MINATAR_GAMES]
# What the published PPO sources give at other budgets and protocols (benchmarks/minatar_sources.md).
MINATAR_SOURCES = (
    "Pgx (examples/minatar-ppo) plots its evaluation return against wall-clock seconds, not steps, "
    "and ends near Asterix 22, Breakout 50, Freeway 63.5, Seaquest 54 and SpaceInvaders 144 at 20M "
    "steps (4,096 envs, sampled actions). gymnax-blines gives final returns at 10M steps only: "
    "Asterix 15, Breakout 28, Freeway 58, SpaceInvaders 131 (no sticky actions, episodes cut at 1,000 "
    "steps, sampled actions). Neither is on this protocol or budget.")

# The pixel step's first half alone (docs/ppo_discrete-to-ppo_atari.html): steps/ppo_atari_1_encoder.py,
# the convolutional encoder on MinAtar's frames, against ppo_discrete.py on the same frames
# flattened into vectors, both at ppo_discrete.py's defaults (4 envs × 128 steps, 4 epochs of 4
# minibatches, α 2.5e-4 decayed, ε 0.2 constant, c₁ 0.5, 499,712 steps), seeds 1-3, all five games.
# The networks differ by design: the encoder (one 3×3 convolution of 16 filters, 128 features, two
# linear heads) against two tanh MLPs of 64 units.
SUITES["encoder"] = [cell for seed in THREE_SEEDS for game in MINATAR_GAMES for cell in (
    ("steps/ppo_atari_1_encoder", f"MinAtar/{game}-v1", [], [seed]),
    ("ppo_discrete", f"benchmarks.flat_minatar:MinAtarFlat/{game}-v1", [], [seed], "discrete-defaults"))]
