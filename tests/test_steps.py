"""The course's steps (steps/, docs/build.py's SUBSTEPS): each sub-step file runs and learns, is
the file before it changed by the idea its docstring names, and changes few lines; the step pages
show each sub-step under its idea, with its count of changed lines."""

import ast
import importlib.util
import re
import sys

import numpy as np
import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "docs"))
import build  # noqa: E402

FILES = sorted({name for chain in build.SUBSTEPS.values() for name in chain})

# Each sub-step file learns: the mean return of its last 20 episodes after a short run, with its
# own defaults on CartPole-v1 (a random policy: about 22). The continuous ones learn Pendulum-v1 (a
# random policy: about −1,200 to −1,300); with the defaults they take from ppo_discrete.py (4 envs
# × 128 steps, 4 epochs) they barely move in 400k steps, so their run takes the flags that
# rl-baselines3-zoo gives PPO on Pendulum (γ 0.9, α 1e-3, 10 epochs, minibatches of 64, no
# entropy bonus).
PENDULUM = dict(env_id="Pendulum-v1", gamma=0.9, learning_rate=1e-3, num_steps=1024, update_epochs=10,
                num_minibatches=64, ent_coef=0.0)
LEARNS = {  # file: (flags, the mean return it must reach)
    "vpg_1_baseline": (dict(total_timesteps=150_000), 250),  # reaches 384
    "vpg_2_rollout": (dict(total_timesteps=148_000), 250),  # 490 (37 batches of 4,000)
    "vpg_2b_truncation": (dict(total_timesteps=148_000), 250),  # 490
    "vpg_3_gae": (dict(total_timesteps=148_000), 250),  # 493
    "ppo_1_clip": (dict(total_timesteps=40_000), 200),  # 319
    "ppo_continuous_1_gaussian": (dict(PENDULUM, total_timesteps=300_000), -700),  # −309
    "ppo_continuous_1b_reward_scaling": (dict(PENDULUM, total_timesteps=300_000), -700),  # −177
    "ppo_continuous_2_norm": (dict(PENDULUM, total_timesteps=300_000), -700),  # −579
    "ppo_atari_1_encoder": (dict(total_timesteps=150_016), 3),  # MinAtar/Breakout-v1 (random: 0.5)
}


def load(name: str):
    spec = importlib.util.spec_from_file_location(f"steps_{name}", ROOT / "steps" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_sub_step_file_is_tested_and_in_the_course():
    assert sorted(LEARNS) == FILES == sorted(p.stem for p in (ROOT / "steps").glob("*.py"))


@pytest.mark.parametrize("name", FILES)
def test_each_sub_step_file_learns(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # its TensorBoard logs: runs/ here
    module = load(name)
    flags, reaches = LEARNS[name]
    state = module.train(module.Args(**flags))
    recent = np.mean([r for _, r in state["episodic_returns"][-20:]])
    assert recent >= reaches, f"{name}: mean return of the last 20 episodes {recent:.1f} < {reaches}"
    assert (tmp_path / "runs").is_dir()


@pytest.mark.parametrize("name", FILES)
def test_each_sub_step_file_is_the_algorithm_alone_and_runs_from_the_command_line(name):
    source = (ROOT / "steps" / f"{name}.py").read_text()
    assert "# --- tooling:" not in source
    main = (ROOT / "vpg.py").read_text().split('if __name__ == "__main__":')[1]
    assert source.endswith('if __name__ == "__main__":' + main)  # the scripts' own: tooling.py, or train alone
    assert f"python steps/{name}.py" in source.split('"""')[1]  # its docstring says how to run it


# The most lines of code and comments each step may change, above the tooling banner (a re-wrap
# counts none, and a blank line neither): what each changes today, so that it can only fall.
# vpg → trpo, one idea, is not split. Each Agent's `greedy_action` (the one method the tooling
# calls) follows its head, and `train` reads its state back by name: a step that changes the head
# or the loop's state changes those lines too.
LIMITS = {("reinforce", "vpg_1_baseline"): 122, ("vpg_1_baseline", "vpg_2_rollout"): 140,
          ("vpg_2_rollout", "vpg_2b_truncation"): 49, ("vpg_2b_truncation", "vpg_3_gae"): 47,
          ("vpg_3_gae", "vpg"): 5, ("vpg", "trpo"): 194,
          ("trpo", "ppo_1_clip"): 217, ("vpg", "ppo_1_clip"): 96, ("ppo_1_clip", "ppo_discrete"): 278,
          ("ppo_discrete", "ppo_continuous_1_gaussian"): 73,
          ("ppo_continuous_1_gaussian", "ppo_continuous_1b_reward_scaling"): 49,
          ("ppo_continuous_1b_reward_scaling", "ppo_continuous_2_norm"): 35,
          ("ppo_continuous_2_norm", "ppo_continuous"): 22,
          # Memory, and three pieces of ppo_continuous.py. Those are the Gaussian head, observation
          # normalisation and reward scaling, since RL Zoo's settings scale rewards (26 lines).
          # RL Zoo's network comes too.
          ("ppo_discrete", "ppo_recurrent"): 400,
          # The encoder and its heads on MinAtar's frames. Then what Atari needs besides: the env's
          # preprocessing (the wrappers Gymnasium lacks), uint8 storage, the PPO paper's Atari
          # defaults, ε decayed, sticky actions (on ALE in a wrapper, for an exact resume), the
          # Nature CNN beside MinAtar's network.
          ("ppo_discrete", "ppo_atari_1_encoder"): 67, ("ppo_atari_1_encoder", "ppo_atari"): 246}


@pytest.mark.parametrize("old,new", build.STEPS)
def test_each_step_page_shows_its_sub_steps_each_under_its_idea_with_its_count(old, new):
    hops = build.course(old, new)
    chain = [old, *build.SUBSTEPS.get((old, new), []), new]
    assert [(a, b) for a, b, *_ in hops] == list(zip(chain, chain[1:], strict=False))
    page = build.step_page(old, new)
    for k, (a, b, idea, one, _) in enumerate(hops, 1):
        _, code, comments = build.changed_blocks(a, b, "algorithm")
        assert 0 < code and 0 < code + comments <= LIMITS[a, b], (a, b, code, comments)
        heading = re.search(rf'<h2 id="step-{k}">(.*?)</h2>', page)[1]
        assert f"{build.file_of(a)} → {build.file_of(b)}: " in heading and build.prose(idea) in heading
        # the count a reader sees is of code, with the comments and docstrings counted apart
        counted = (f"{code} line{'s' * (code != 1)} of code removed or added, and {comments} "
                   f"line{'s' * (comments != 1)} of comments and docstrings")
        assert f"{counted}, in the algorithm" in page.split(f'id="step-{k}"')[1].split("<h3>")[0]
        kind = "one idea" if one else "not one idea"
        assert f"({kind}; {counted})" in page
    # a step's text is whole: its equations typeset, and the prose that goes on after them
    if (old, new) == ("reinforce", "vpg"):
        first = page.split('id="step-1"')[1].split("<h3>")[0]
        assert "<math" in first and "The baseline is thus the only change" in first, first[-300:]
    # the tooling's differences come once, after the steps
    assert page.count("<h2>Everything else") == 1 and page.index(f'id="step-{len(hops)}"') < page.index(
        "<h2>Everything else")


def test_one_idea_is_claimed_only_by_a_step_that_brings_one():
    """A step split into sub-steps no longer claims to be one idea; a sub-step that is a set of
    details (the reference code's, MuJoCo's defaults, Atari's) or that brings two ideas says so, and claims
    no idea. So does the recurrent branch, which brings memory with pieces of ppo_continuous.py,
    RL Zoo's network and its defaults (counted by the next test)."""
    hops = [hop for old, new in build.STEPS for hop in build.course(old, new)]
    claims = {(a, b): one for a, b, _, one, _ in hops}
    details = {("ppo_1_clip", "ppo_discrete"), ("ppo_continuous_2_norm", "ppo_continuous"),
               ("ppo_atari_1_encoder", "ppo_atari")}  # Atari's details and the PPO paper's defaults
    two_ideas = set()  # each that brought two ideas is split in two steps of one idea each
    several = {("ppo_discrete", "ppo_recurrent")}  # memory first, then the rest, listed
    assert {k for k, one in claims.items() if not one} == details | two_ideas | several
    for a, b, idea, _, _ in hops:
        assert idea.startswith("two ideas, ") == ((a, b) in two_ideas), (a, b, idea)
    for a, b, _, one, paragraph in hops:
        if not one:
            assert "one idea" not in re.sub(r"(?i)not one idea", "", paragraph), (a, b)
    for (old, new), chain in build.SUBSTEPS.items():
        doc = " ".join(build.source_of(new).split('"""')[1].split())
        assert chain and f"What changes from {old}.py, one idea" not in doc, (old, new)


def args_defaults(name: str) -> dict[str, str]:
    """The default of each field of a script's `Args`, as its source writes it."""
    tree = ast.parse(build.source_of(name))
    args = next(node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "Args")
    return {n.target.id: ast.unparse(n.value) for n in args.body if isinstance(n, ast.AnnAssign)}


def test_the_recurrent_step_names_what_it_brings_and_counts_the_defaults_it_changes():
    """ppo_discrete.py → ppo_recurrent.py: its idea lists memory first, then the pieces of
    ppo_continuous.py, and the number of ppo_discrete.py's defaults that it changes, counted
    here from both `Args`. Its text names the two normalisers' flags, which ppo_discrete.py lacks."""
    (_, _, idea, one, paragraph), = build.course("ppo_discrete", "ppo_recurrent")
    old, new = args_defaults("ppo_discrete"), args_defaults("ppo_recurrent")
    changed = [field for field in old if field in new and old[field] != new[field]]
    assert not one and idea.startswith("memory, three pieces of ppo_continuous.py"), idea
    assert idea.endswith(f" {len(changed)} changed defaults"), (idea, changed)
    # the paragraph, and the step's note beside it on the page (docs/notes/ppo_recurrent.md, `## step`)
    note = [n for n in build.side_notes.load("ppo_recurrent", build.source_of("ppo_recurrent")) if n.anchor == "step"]
    paragraph = " ".join(" ".join([paragraph, *note[0].body]).split())
    assert f"{len(changed)} defaults change" in paragraph, changed
    added = [field for field in new if field not in old]
    assert sorted(added) == ["norm_obs", "norm_reward"]
    assert all(f"--{field.replace('_', '-')}" in paragraph for field in added)
