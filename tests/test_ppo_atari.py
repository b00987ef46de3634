"""Tests specific to ppo_atari.py: the preprocessing of ALE games on a fake ALE-like game whose
every frame, life and reward is known; the encoders on both frame sizes; a tiny run on a real ALE
game and on a MinAtar game; an exact resume of both. The tooling's tests run on this script too
(conftest.SHORT_RUNS)."""

import pickle

import gymnasium as gym
import numpy as np
import pytest
import torch
from conftest import ROOT, run_script, short_args
from test_extension_points import resume_check

import ppo_atari as atari
import tooling

LIFE = 40  # frames a life lasts in FakeAtari
REWARD = 5.0  # its reward every frame: a game's real score is 5 × its frames


class FakeALE:
    """The part of ale_py's ALEInterface that Gymnasium's AtariPreprocessing and the script read."""

    def __init__(self, game):
        self.game = game

    def lives(self):
        return self.game.lives

    def getScreenGrayscale(self, out):  # noqa: N802 (ALE's name)
        out[...] = self.game.screen()

    def getScreenRGB(self, out):  # noqa: N802
        out[...] = self.game.screen()[..., None]


class FakeAtari(gym.Env):
    """An ALE-like game: 3 lives of LIFE frames each, whatever the actions, REWARD every frame.
    On odd frames the left half of the screen is lit, on even frames the right half, so that the
    max of two frames lights both. It records every call it gets in `calls`."""

    def __init__(self, frameskip=1, repeat_action_probability=0.0, render_mode=None):
        assert frameskip == 1 and repeat_action_probability == 0.0  # as make_env asks
        self._frameskip, self.render_mode = 1, render_mode
        self.observation_space = gym.spaces.Box(0, 255, (210, 160, 3), np.uint8)
        self.action_space = gym.spaces.Discrete(4)
        self.ale, self.calls, self.frame, self.lives = FakeALE(self), [], 0, 3

    def get_action_meanings(self):
        return ["NOOP", "FIRE", "RIGHT", "LEFT"]

    def screen(self):
        screen = np.zeros((210, 160), np.uint8)
        (screen[:, :80] if self.frame % 2 else screen[:, 80:])[...] = 200
        return screen

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.frame, self.lives = 0, 3
        self.calls.append("reset")
        return np.zeros((210, 160, 3), np.uint8), {"lives": self.lives}

    def step(self, action):
        self.calls.append(int(action))
        self.frame += 1
        self.lives = 3 - self.frame // LIFE
        return (np.zeros((210, 160, 3), np.uint8), REWARD, self.lives == 0, False,
                {"lives": self.lives})

    def render(self):
        return np.zeros((210, 160, 3), np.uint8)


gym.register("ALE/Fake-v5", entry_point=FakeAtari)


def game(env):
    return env.unwrapped


def test_no_op_starts_then_fire_at_reset():
    """Up to 30 NOOPs after a real reset, their count drawn from the env's seed, then FIRE (an
    agent step: 4 frames)."""
    counts = set()
    for seed in range(12):
        env = atari.make_env("ALE/Fake-v5")
        env.reset(seed=seed)
        calls = game(env).calls
        assert calls[0] == "reset" and calls[-4:] == [1] * 4, calls  # FIRE last
        noops = calls[1:-4]
        assert 1 <= len(noops) <= 30 and set(noops) == {0}, calls
        counts.add(len(noops))
    assert len(counts) > 3  # drawn, not fixed


def test_frames_are_skipped_by_four_and_the_last_two_max_pooled():
    env = atari.make_env("ALE/Fake-v5")
    obs, _ = env.reset(seed=0)
    assert obs.shape == (4, 84, 84) and obs.dtype == np.uint8
    frames_before = game(env).frame
    obs, *_ = env.step(2)
    assert game(env).frame == frames_before + 4 and game(env).calls[-4:] == [2] * 4
    # The two last frames light the two halves: their max lights both. One frame lights one half.
    assert obs[-1, :, :40].min() == 200 and obs[-1, :, 44:].min() == 200


def test_fire_after_each_lost_life_in_evaluation_and_rewards_as_the_game_gives_them():
    env = atari.make_env("ALE/Fake-v5")  # as evaluation makes it
    env.reset(seed=0)
    rewards, done = [], False
    while not done:
        before = len(game(env).calls)
        _, reward, terminated, truncated, info = env.step(3)
        new = game(env).calls[before:]
        if game(env).lives < 3 and game(env).lives > 0 and 1 in new:
            assert new[new.index(1) - 1] == 3  # FIRE follows the frames of the life's last step
        rewards.append(reward)
        done = terminated or truncated
    # One FIRE step (4 frames) per life: at reset, and after each of the 2 lives lost mid-game.
    assert game(env).calls.count(1) == 3 * 4
    assert set(rewards[:-1]) == {4 * REWARD} or set(rewards[:-1]) == {4 * REWARD, 8 * REWARD}
    assert info["game"]["r"] == REWARD * 3 * LIFE  # the whole game, all lives, unclipped


def test_a_lost_life_ends_the_training_episode_but_not_the_logged_game():
    env = atari.make_env("ALE/Fake-v5", train=True)
    env.reset(seed=0)
    ends, rewards, logged = [], [], []
    for _ in range(200):
        _, reward, terminated, truncated, info = env.step(2)
        rewards.append(reward)
        if "game" in info:
            logged.append(info["game"]["r"])
        if terminated or truncated:
            ends.append(game(env).lives)
            if len(ends) == 3:
                break
            env.reset()
    assert ends == [2, 1, 0]  # terminated at each lost life
    assert game(env).calls.count("reset") == 1  # one real reset: the game went on after a life
    assert set(rewards) == {1.0}  # clipped to its sign for training
    assert logged == [REWARD * 3 * LIFE]  # logged once, the game's real score


def test_the_training_loop_logs_the_games_real_score(tmp_path):
    """`charts/episodic_return` is each game's unclipped score over all its lives, though the
    agent trains on clipped rewards and episodes of one life."""
    args = atari.Args(env_id="ALE/Fake-v5", num_envs=2, num_steps=64, total_timesteps=256,
                      update_epochs=1)
    state = atari.train(args, writer=_writer(tmp_path))
    returns = [r for _, r in state["episodic_returns"]]
    assert returns and set(returns) == {REWARD * 3 * LIFE}


def _writer(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    return SummaryWriter(str(tmp_path))


@pytest.mark.parametrize("shape, name, features", [((4, 84, 84), "the Nature CNN", 512),
                                                   ((4, 10, 10), "MinAtar's network", 128),
                                                   ((10, 10, 10), "MinAtar's network", 128)])
@pytest.mark.parametrize("batch", [1, 5])
def test_the_encoders_shapes_on_both_frame_sizes(shape, name, features, batch):
    high = 255 if shape[1] == 84 else 1
    space = gym.spaces.Box(0, high, shape, np.uint8)
    agent = atari.Agent(space, 6)
    assert agent.name.startswith(name) and agent.encoder[-2].out_features == features
    obs = torch.randint(0, high + 1, (batch, *shape), dtype=torch.uint8)
    action, logprob, entropy, value = agent.get_action_and_value(obs)
    assert action.shape == logprob.shape == entropy.shape == value.shape == (batch,)
    assert agent.get_value(torch.zeros(batch, *shape, dtype=torch.uint8)).shape == (batch,)
    # The 0.01 policy head starts π near uniform: H ≈ log 6.
    assert entropy.mean().item() == pytest.approx(np.log(6), abs=1e-2)
    # Pixels are scaled to [0, 1]: 0/1 frames stay as they are.
    assert agent.scale.item() == pytest.approx(1 / high)


def test_the_nature_cnn_is_mnih_et_al_2015():
    agent = atari.Agent(gym.spaces.Box(0, 255, (4, 84, 84), np.uint8), 4)
    convs = [m for m in agent.encoder if isinstance(m, torch.nn.Conv2d)]
    assert [(c.out_channels, c.kernel_size[0], c.stride[0]) for c in convs] == [(32, 8, 4), (64, 4, 2),
                                                                              (64, 3, 1)]
    assert agent.encoder[-2].in_features == 64 * 7 * 7


def test_the_rollout_stores_frames_as_uint8(tmp_path, monkeypatch):
    seen = {}

    class NumPy:  # numpy, as ppo_atari.py sees it, with np.zeros recorded
        def __getattr__(self, name):
            return getattr(np, name)

        def zeros(self, shape, dtype=float):
            if len(shape) == 5:  # (T, N, C, H, W)
                seen["obs"] = dtype
            return np.zeros(shape, dtype)

    monkeypatch.setattr(atari, "np", NumPy())
    atari.train(atari.Args(env_id="MinAtar/Breakout-v1", num_envs=2, num_steps=32,
                           total_timesteps=64, update_epochs=1), writer=_writer(tmp_path))
    assert seen["obs"] == np.uint8


def test_a_tiny_ale_run_trains_saves_and_evaluates(tmp_path):
    out = run_script("ppo_atari.py", "--env-id", "ALE/Breakout-v5", "--num-envs", "2", "--num-steps", "32",
                     "--total-timesteps", "128", "--eval-episodes", "1", "--save-model",
                     "--log-dir", str(tmp_path), timeout=300)
    assert out.returncode == 0, out.stderr
    first = out.stdout.splitlines()[0]
    assert first == ("ALE/Breakout-v5: Atari preprocessing after DQN's (make_env), sticky actions 0.0, "
                     "observations (4, 84, 84), the Nature CNN"), first
    assert "ALE/Breakout-v5: mean return" in out.stdout


def test_a_tiny_minatar_run_says_what_it_uses(tmp_path):
    out = run_script("ppo_atari.py", "--env-id", "MinAtar/Seaquest-v1", "--total-timesteps", "1024",
                     "--eval-episodes", "1", "--log-dir", str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == ("MinAtar/Seaquest-v1: frames as the env gives them, "
                                          "channels first (make_env), sticky actions 0.1, "
                                          "observations (10, 10, 10), "
                                          "MinAtar's network (one 3×3 convolution)")


@pytest.mark.parametrize("flags", [["--env-id", "MinAtar/Breakout-v1", "--total-timesteps", "3072"],
                                   ["--env-id", "ALE/Pong-v5", "--num-envs", "2", "--num-steps", "32",
                                    "--num-minibatches", "2", "--total-timesteps", "320"],
                                   ["--env-id", "ALE/Breakout-v5", "--num-envs", "4", "--num-steps", "32",
                                    "--num-minibatches", "2", "--total-timesteps", "640",
                                    "--sticky-actions", "0.25"]])
def test_resumes_exactly_mid_game(flags):
    """ALE's env pickles only its arguments: SaveALEState keeps the emulator's state, so the
    resumed run plays on in the same games, with sticky actions too."""
    out = resume_check(ROOT / "ppo_atari.py", *flags, "--checkpoint-every", "2")
    assert out.returncode == 0 and out.stdout.strip().endswith("ppo_atari.py: resumes exactly"), \
        out.stdout[-2000:] + out.stderr[-2000:]


@pytest.mark.parametrize("sticky_actions", [None, 0.25])
def test_an_ale_env_pickled_mid_game_plays_on_as_the_original(sticky_actions):
    """With sticky actions too: ALE's saved state leaves out the action that its own option
    repeats, so a copy would part from the original at its first step in some games (2 of these
    8 with ALE's option)."""
    rng = np.random.default_rng(0)
    for seed in range(8):
        env = atari.make_env("ALE/Breakout-v5", train=True, sticky_actions=sticky_actions)
        env.reset(seed=seed)
        for action in rng.integers(0, 4, 60 + 7 * seed):
            env.step(int(action))
        copy = pickle.loads(pickle.dumps(env))
        for action in rng.integers(0, 4, 100):
            a, b = env.step(int(action)), copy.step(int(action))
            assert np.array_equal(a[0], b[0]) and a[1:4] == b[1:4], seed


def test_vector_observations_are_refused_naming_ppo_discrete():
    out = run_script("ppo_atari.py", "--env-id", "CartPole-v1")
    assert out.returncode == 1 and "for vectors use ppo_discrete.py" in out.stderr, out.stderr


def test_a_missing_package_is_named_with_its_install_command(monkeypatch, capsys):
    import builtins

    real_import = builtins.__import__

    def no_ale(name, *args, **kwargs):
        if name == "ale_py":
            raise ModuleNotFoundError("No module named 'ale_py'", name="ale_py")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_ale)
    with pytest.raises(SystemExit) as stop:
        tooling.check_args(atari, short_args(atari, "runs", env_id="ALE/Breakout-v5"))
    # tooling.check_args's own line: `main` puts "ppo_atari.py: error: " before it
    assert str(stop.value) == "--env-id ALE/Breakout-v5: needs ale_py: pip install ale-py"


@pytest.mark.parametrize("env_id, default", [("ALE/Breakout-v5", 0.0), ("MinAtar/Breakout-v1", 0.1)])
def test_sticky_actions_reach_the_game_in_training_and_evaluation(env_id, default, tmp_path):
    """The flag, or by default DQN's 0 on ALE and MinAtar's own 0.1, in the training envs and in
    the evaluation's env: MinAtar's sticky_action_prob, and on ALE Gymnasium's StickyAction over an
    emulator that repeats nothing itself."""
    def sticky(env):
        game = env.unwrapped
        if not hasattr(game, "ale"):
            return game.game.sticky_action_prob
        assert game.ale.getFloat("repeat_action_probability") == 0.0
        return env.get_wrapper_attr("repeat_action_probability") if env.has_wrapper_attr(
            "repeat_action_probability") else 0.0

    for flag, expected in [(None, default), (0.25, 0.25), (0.0, 0.0)]:
        envs = atari.make_vec_env(env_id, 2, flag)
        assert [sticky(env) for env in envs.envs] == pytest.approx([expected] * 2)
        envs.close()
        args = short_args(atari, str(tmp_path), env_id=env_id, sticky_actions=flag)
        assert sticky(tooling.make_env(atari, args)) == pytest.approx(expected)
        assert atari.sticky(env_id, flag) == expected


def test_sticky_actions_change_what_the_game_does():
    """With probability 1 MinAtar repeats its last action for ever, and that starts as a no-op:
    the Breakout paddle never moves. Without sticky actions it goes where it is sent."""
    def paddle_columns(p):
        env = atari.make_env("MinAtar/Breakout-v1", sticky_actions=p)
        obs, _ = env.reset(seed=0)
        columns = [int(np.flatnonzero(obs[0, 9])[0])]  # channel 0 is the paddle, on row 9
        for action in [1, 1, 1, 2, 2]:  # the minimal set: 0 no-op, 1 left, 2 right
            obs = env.step(action)[0]
            columns.append(int(np.flatnonzero(obs[0, 9])[0]))
        return columns

    assert len(set(paddle_columns(1.0))) == 1
    moved = paddle_columns(0.0)
    assert moved == [4, 3, 2, 1, 2, 3], moved


def test_evaluation_plays_past_10000_steps_to_the_envs_own_limit(tmp_path):
    """ALE's games are cut at 108,000 frames (27,000 steps): an evaluation game is not cut
    sooner. An env of 12,000 steps (reward 1 each) is played to its end; the cap was 10,000."""
    if "Tick12k-v0" not in gym.registry:
        gym.register("Tick12k-v0", entry_point="conftest:TickEnv", max_episode_steps=12_000)

    class Constant:
        def greedy_action(self, obs, memory=None):
            return 0, None

    import ppo_discrete
    args = short_args(ppo_discrete, str(tmp_path), env_id="Tick12k-v0", eval_episodes=1)
    assert tooling.evaluate(ppo_discrete, Constant(), args, str(tmp_path)) == [12_000.0]
    assert atari.make_env("ALE/Breakout-v5").spec.max_episode_steps == 108_000  # frames


def test_sampled_evaluation_samples_from_the_policy_and_is_reproducible(tmp_path):
    """--eval-sampled plays as many episodes again, each action drawn from π: a uniform policy
    gives several actions where the greedy one gives one. The same seed gives the same returns."""
    env = atari.make_env("MinAtar/Breakout-v1")
    agent = atari.make_agent(atari.Args(), env.observation_space, env.action_space)
    obs, _ = env.reset(seed=0)
    assert len({agent.sampled_action(obs)[0] for _ in range(60)}) == env.action_space.n
    assert len({agent.greedy_action(obs)[0] for _ in range(60)}) == 1
    args = short_args(atari, str(tmp_path), env_id="MinAtar/Breakout-v1", total_timesteps=2048,
                      eval_episodes=3, eval_sampled=True)
    first, second = tooling.main(atari, args), tooling.main(atari, args)
    assert len(first["eval_sampled_returns"]) == 3 and len(first["eval_returns"]) == 3
    assert first["eval_sampled_returns"] == second["eval_sampled_returns"]


def test_sampled_evaluation_is_refused_where_the_agent_cannot_sample(tmp_path):
    out = run_script("ppo_discrete.py", "--eval-sampled", "--log-dir", str(tmp_path))
    assert out.returncode == 1 and out.stderr.strip() == (
        "ppo_discrete.py: error: --eval-sampled: the Agent of ppo_discrete.py has no "
        "sampled_action(obs, memory)"), out.stderr


def test_eval_checkpoint_takes_sticky_actions_but_no_other_flag_of_the_model(tmp_path):
    args = short_args(atari, str(tmp_path), env_id="MinAtar/Breakout-v1", total_timesteps=1024,
                      eval_episodes=0, save_model=True)
    model = tooling.main(atari, args)["run_dir"] + "/model.pt"
    ok = run_script("ppo_atari.py", "--eval-checkpoint", model, "--sticky-actions", "0.25",
                    "--eval-episodes", "1")
    assert ok.returncode == 0 and "sticky" not in ok.stderr, ok.stderr
    refused = run_script("ppo_atari.py", "--eval-checkpoint", model, "--clip-coef", "0.3")
    assert refused.returncode == 1 and "leave out --clip-coef" in refused.stderr
