"""exercises/: the generator cuts out exactly the listed code and nothing else, keeps every
comment, and finds a block inside a function by its statements, not its line numbers. The grader
passes the reference scripts and fails a fresh copy with each exercise's hint. It names the
mistake of typical wrong implementations: two per exercise for the first nine, more for exercises
4, 6 and 13, and for the blocks inside train and trpo_step each one named by the first check that
fails. It prints that name once, with no cascade of later failures, and one line for a mistake
copied into several files. It accepts CleanRL's early stop on the last minibatch's KL."""

import ast
import difflib
import re
import shutil
import sys

import gymnasium as gym
import pytest
import torch
from conftest import ROOT

sys.path.insert(0, str(ROOT / "exercises"))
import grade  # noqa: E402
import make  # noqa: E402
from ladder import LADDER, SCRIPTS, Part  # noqa: E402


def listed(script: str) -> dict[str, list[str | None]]:
    """The functions that lose their whole body or a head, by name: their branches (None: the body)."""
    out = {}
    for ex in LADDER:
        for part in ex.parts:
            if part.script == script and part.block is None:
                out.setdefault(part.name, []).append(part.branch)
    return out


def definitions(tree: ast.Module) -> dict[str, ast.AST]:
    """Every function and method by its dotted name, with the functions defined inside them."""
    out = {}

    def walk(body, prefix):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                out[prefix + node.name] = node
                walk(node.body, f"{prefix}{node.name}.")

    walk(tree.body, "")
    return out


# Each block cut from a function, by its anchors: the first and the last line of the code it cuts
# (stripped). The comment lines among them stay.
BLOCK_CUTS = {
    ("if truncated.any():",): ("if truncated.any():  # Bootstrap a cut episode with V of its real final observation.",
                               "final_values_np[step, idx] = agent.get_value(final_obs).cpu().numpy()"),
    ("next_value = agent.get_value(next_obs)", "next_values = torch.where("): (
        "with torch.no_grad():", "next_values = torch.where(truncations.bool(), final_values, next_values)"),
    ("for _epoch in range(args.update_epochs):",): ("for _epoch in range(args.update_epochs):", "break"),
    ("full_step = ",): ("full_step = (2 * args.max_kl / (x @ fvp(x)).clamp_min(1e-30)) ** 0.5 * x",) * 2,
}


def block_lines(lines: list[str], node: ast.AST, block: tuple[str, ...]) -> range:
    """The 0-based indices of a block's lines in the reference, from BLOCK_CUTS: from the last
    line before the first anchor's that is the block's first, to the next that is its last."""
    first, last = BLOCK_CUTS[block]
    body = range(node.lineno - 1, node.end_lineno)
    (anchor,) = [i for i in body if block[0] in lines[i]]
    start = max(i for i in body if i <= anchor and lines[i].strip() == first)
    end = next(i for i in body if i >= start and lines[i].strip() == last)
    return range(start, end + 1)


@pytest.mark.parametrize("script", SCRIPTS)
def test_the_generator_blanks_exactly_the_listed_code(script, tmp_path):
    make.make(tmp_path)
    reference = (ROOT / f"{script}.py").read_text()
    student = (tmp_path / f"{script}.py").read_text()
    ref_defs, student_defs = definitions(ast.parse(reference)), definitions(ast.parse(student))
    assert ref_defs.keys() == student_defs.keys()
    for name, branches in listed(script).items():
        node = student_defs[name]
        assert ast.get_docstring(node) == ast.get_docstring(ref_defs[name])  # the docstring is the spec
        if branches == [None]:
            body = node.body[1:] if ast.get_docstring(node) is not None else node.body
            assert len(body) == 1 and isinstance(body[0], ast.Raise), name
        else:
            # one head of two: the block `if self.continuous:` (Gaussian), then the code after it
            # (categorical), each kept with its closing return
            test = next(n for n in node.body if isinstance(n, ast.If))
            for branch in branches:
                block = test.body if branch == "if" else node.body[node.body.index(test) + 1:]
                assert [type(n) for n in block] == [ast.Raise, ast.Return], (name, branch)
    # Every changed line of the reference lies inside a listed definition or block; the student
    # copy keeps its comment lines and replaces the rest with `raise NotImplementedError(...)`
    # lines. A block loses every line of its code and nothing around it.
    ref_lines, student_lines = reference.split("\n"), student.split("\n")
    inside, blocks = set(), []
    for name in listed(script):
        inside.update(range(ref_defs[name].lineno - 1, ref_defs[name].end_lineno))
    for ex in LADDER:
        for part in ex.parts:
            if part.script == script and part.block is not None:
                blocks.append(block_lines(ref_lines, ref_defs[part.name], part.block))
                inside.update(blocks[-1])
                node = student_defs[part.name]
                raises = [n for n in ast.walk(node) if isinstance(n, ast.Raise) and f"exercise {ex.number}:" in ast.unparse(n)]
                inner = [p for p in ex.parts if p.script == script and p.name.startswith(part.name)]
                assert len(raises) == len(inner), part  # one per block, and per function defined inside
    removed = set()
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, ref_lines, student_lines, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        removed.update(range(i1, i2))
        assert set(range(i1, i2)) <= inside, (tag, ref_lines[i1:i2])
        assert all("raise NotImplementedError(\"exercise " in line for line in student_lines[j1:j2]), student_lines[j1:j2]
    for block in blocks:
        code = {i for i in block if ref_lines[i].strip() and not ref_lines[i].strip().startswith("#")}
        assert code <= removed and block.start - 1 not in removed and block.stop not in removed, ref_lines[block.start]
    for line in ref_lines:
        if line.strip().startswith("# math:"):
            assert line in student_lines  # the equations stay


@pytest.mark.parametrize("script", SCRIPTS)
def test_a_blanked_body_keeps_its_comments(script, tmp_path):
    """Every whole-line comment of the reference, the explanations as well as the `# math:` lines,
    is in the student's copy, in its place among the others."""
    make.make(tmp_path)
    comments = [line for line in (ROOT / f"{script}.py").read_text().split("\n") if line.strip().startswith("#")]
    kept = [line for line in (tmp_path / f"{script}.py").read_text().split("\n") if line.strip().startswith("#")]
    assert kept == comments
    explaining = [line for ex in LADDER for part in ex.parts if part.script == script for line in make_region(part)
                  if line.strip().startswith("#") and not line.strip().startswith("# math:")]
    assert explaining  # each script has explanations in a cut body, which the copy keeps


def make_region(part) -> list[str]:
    """The reference's lines that the generator cuts for `part` (its region, comments included)."""
    lines = (ROOT / f"{part.script}.py").read_text().split("\n")
    start, end, _ = make.region(lines, make.find(ast.parse("\n".join(lines)), part.name), part.branch, part.block)
    return lines[start - 1:end]


def test_a_block_is_found_by_its_statements_not_its_line_numbers():
    """Lines added above train and inside it, around a block and in it (comments, blank lines)
    move nothing: the copy is the same but for the comments added, and a blank line in a block
    goes with its code."""
    source = (ROOT / "ppo_discrete.py").read_text()
    parts = make.parts_of("ppo_discrete")
    normalised = "                # Normalised per minibatch"
    edits = [("\n\ndef train(", "\n\n# a comment\n\ndef train("),
             ("        # --- bootstrap and advantages ---\n", "        # --- bootstrap and advantages ---\n\n        # more\n"),
             (normalised, "                # a comment inside the block\n" + normalised)]
    edited = source.replace("mb_advantages = b_advantages[mb_inds]\n", "mb_advantages = b_advantages[mb_inds]\n\n")
    for old, new in edits:
        assert source.count(old) == 1, old
        edited = edited.replace(old, new)
    expected = make.blank(source, parts)
    for old, new in edits:
        expected = expected.replace(old, new)
    assert edited != source and make.blank(edited, parts) == expected


def test_an_anchor_that_names_no_statement_or_several_is_refused():
    source = (ROOT / "vpg.py").read_text()
    for anchor, count in [("with torch.no_grad():", 2), ("no such line", 0)]:
        part = Part("vpg", "train", block=(anchor,))
        with pytest.raises(SystemExit, match=f"{count} statements of train begin with a line that holds"):
            make.blank(source, [(10, "hint", part)])


def test_the_reference_scripts_pass_every_exercise():
    lines = []
    passed = grade.grade(ROOT, [ex.number for ex in LADDER], learning=False, out=lines.append)
    assert all(passed.values()), "\n".join(line for line in lines if "✗" in line)


def test_a_fresh_copy_fails_every_exercise_with_its_hint(tmp_path):
    make.make(tmp_path)
    lines = []
    passed = grade.grade(tmp_path, [ex.number for ex in LADDER], learning=False, out=lines.append)
    assert not any(passed.values())
    for ex in LADDER:
        assert any(f"not written yet: exercise {ex.number}: {ex.hint}" in line for line in lines), ex.number


def plant(folder, script: str, *edits: tuple[str, str]) -> None:
    """The six reference scripts copied into `folder`, with each (right, wrong) of `edits` planted
    in `script`: the right code must occur there once."""
    for name in SCRIPTS:
        shutil.copy(ROOT / f"{name}.py", folder)
    source = (folder / f"{script}.py").read_text()
    for right, wrong in edits:
        assert source.count(right) == 1, right
        source = source.replace(right, wrong)
    (folder / f"{script}.py").write_text(source)


RETURNS_LOOP = "        returns[t] = next_return\n    return returns\n"
# the mistake: every step gets its episode's whole return
FULL_RETURN = RETURNS_LOOP.replace("    return returns\n", """    for t in range(1, rewards.shape[0]):
        if not dones[t - 1]:
            returns[t] = returns[t - 1]
    return returns
""")
# Agent.unroll's reset of the state, and the step that follows it (the mistake: the reset after the step)
RESET = "            state = state * (1.0 - episode_starts[begin])[:, None]\n"
UNROLL_STEP = """\
            # (1, B, H) each, contiguous: cuDNN's LSTM refuses a non-contiguous state.
            h_actor, c_actor, h_critic, c_critic = (x.contiguous() for x in state[None].chunk(4, 2))
            out, (h_actor, c_actor) = self.actor_lstm(obs[begin:end], (h_actor, c_actor))
            actor_out.append(out)
            out, (h_critic, c_critic) = self.critic_lstm(obs[begin:end], (h_critic, c_critic))
            critic_out.append(out)
            state = torch.cat([h_actor, c_actor, h_critic, c_critic], dim=-1)[0]
"""
# The KL early stop after each epoch, and the mistake of issue 72: the same lines inside the
# minibatch loop, where they stop an epoch after its first minibatch
KL_STOP_AFTER_EPOCH = """                epoch_stats.append(stats)
            update_stats += epoch_stats
            # Early stop: the policy has already moved far from π_old.
            epoch_kl = torch.stack([s["approx_kl"] for s in epoch_stats]).mean()
            if args.target_kl is not None and epoch_kl > args.target_kl:
                break
"""
EPOCH_HEAD = """        for _epoch in range(args.update_epochs):
            b_inds = torch.randperm(batch_size, device=device)
            epoch_stats = []
"""
KL_STOP_IN_MINIBATCH_LOOP = """                epoch_stats.append(stats)
                epoch_kl = torch.stack([s["approx_kl"] for s in epoch_stats]).mean()
                if args.target_kl is not None and epoch_kl > args.target_kl:
                    break
            update_stats += epoch_stats
"""
# (exercise, script, reference code, wrong code, words of the message that must name the mistake)
WRONG = [
    (1, "reinforce", "gamma * (1.0 - dones[t]) * next_return", "gamma * next_return", "leak into the next episode"),
    (1, "reinforce", RETURNS_LOOP, FULL_RETURN, "the episode's whole return, not the reward-to-go"),
    (2, "reinforce", "return -(logprob * returns).mean()", "return (logprob * returns).mean()", "the sign is flipped"),
    (2, "reinforce", "return -(logprob * returns).mean()", "return -(logprob * returns).sum()", "a sum instead of a mean"),
    (3, "ppo_discrete", "log_pi = logits - logits.logsumexp(-1, keepdim=True)", "log_pi = logits", "is not normalised"),
    (3, "ppo_discrete", "entropy = -(log_pi * log_pi.softmax(-1)).sum(-1)",
     "entropy = (log_pi * log_pi.softmax(-1)).sum(-1)", "the entropy is wrong (its sign?)"),
    (4, "vpg", "gamma * (1.0 - terminations) * next_values",
     "gamma * (1.0 - torch.maximum(terminations, truncations)) * next_values", "termination and truncation are mixed up"),
    (4, "vpg", "not_dones = 1.0 - torch.maximum(terminations, truncations)", "not_dones = 1.0 - terminations",
     "your advantages run into the next episode"),
    (5, "vpg", "return -(logprob * advantages).mean()", "return (logprob * advantages).mean()", "the sign is flipped"),
    (5, "vpg", "return ((value - returns) ** 2).mean()", "return (value - returns).abs().mean()",
     "the value loss is not the mean squared error"),
    (6, "ppo_discrete", "return torch.min(ratio * advantages, clipped_ratio * advantages).mean()",
     "return torch.max(ratio * advantages, clipped_ratio * advantages).mean()", "not the pessimistic minimum"),
    (6, "ppo_discrete", "return torch.min(ratio * advantages, clipped_ratio * advantages).mean()",
     "return -torch.min(ratio * advantages, clipped_ratio * advantages).mean()", "the sign is flipped: `surrogate`"),
    (6, "ppo_discrete", "loss = pg_loss + vf_coef * v_loss - ent_coef * entropy_loss",
     "loss = pg_loss + vf_coef * v_loss + ent_coef * entropy_loss", "the entropy is a bonus"),
    (7, "ppo_continuous", "logprob = log_density.sum(-1)", "logprob = log_density.mean(-1)", "a mean instead of a sum"),
    (7, "ppo_continuous", "entropy = (0.5 + 0.5 * math.log(2 * math.pi) + std.log()).sum(-1)",
     "entropy = (0.5 + 0.5 * math.log(2 * math.pi) + 0 * std).sum(-1)", "the entropy of the Gaussian is wrong"),
    (8, "ppo_continuous", "        self.count = total  # n ← N", "        pass  # the count is never updated",
     "do not merge each batch with what came before"),
    (8, "ppo_continuous", "self.discounted_return[done] = 0.0", "done = done", "the reward scale is wrong"),
    (9, "trpo", "retain_graph=True) + damping * v", "retain_graph=True)", "the damping term is missing"),
    (9, "trpo", "x, r = x + alpha * p, r - alpha * Ap", "x, r = x + alpha * p, r + alpha * Ap",
     "your iteration does not solve A x = b"),
    (11, "ppo_discrete", "                optimizer.zero_grad()\n", "",
     "the gradients of earlier minibatches add to each step's"),
    (11, "ppo_discrete", KL_STOP_AFTER_EPOCH, KL_STOP_IN_MINIBATCH_LOOP, "the early stop acts inside an epoch"),
    (11, "ppo_discrete", 'epoch_kl = torch.stack([s["approx_kl"] for s in epoch_stats]).mean()',
     'epoch_kl = torch.stack([s["approx_kl"] for s in epoch_stats]).sum()', "not their sum"),
    (4, "vpg", "deltas = rewards + gamma * (1.0 - terminations) * next_values - values",
     "deltas = rewards + gamma * (1.0 - terminations) * torch.cat([values[1:], 0 * values[:1]]) - values",
     "your GAE ignores next_values"),
    (13, "ppo_recurrent", RESET, "", "no reset at episode starts"),
    (13, "ppo_recurrent", "        actor_out, critic_out = [], []\n",
     "        actor_out, critic_out = [], []\n        state = torch.zeros_like(state)\n", "replays from a zero state"),
]


@pytest.mark.parametrize("number,script,right,wrong,mistake", WRONG, ids=[f"{w[0]}-{w[4][:30]}" for w in WRONG])
def test_a_typical_mistake_fails_with_a_message_that_names_it(number, script, right, wrong, mistake, tmp_path):
    plant(tmp_path, script, (right, wrong))
    lines = []
    passed = grade.grade(tmp_path, [number], learning=False, out=lines.append)
    assert not passed[number]
    failures = [line for line in lines if "✗" in line]
    assert any(mistake in line for line in failures), "\n".join(failures)


def test_no_property_is_ticked_that_failed_a_skipped_last_minibatch(tmp_path):
    """Each epoch's minibatches are counted: an update that skips the last minibatch of every epoch
    gets no ✓ for running --num-minibatches minibatches an epoch."""
    plant(tmp_path, "ppo_discrete", ("for start in range(0, batch_size, minibatch_size):",
                                     "for start in range(0, batch_size - minibatch_size, minibatch_size):"))
    lines = []
    assert not grade.grade(tmp_path, [11], learning=False, out=lines.append)[11]
    ticked = [line for line in lines if "✓" in line and "ppo_discrete.py" in line.split(": ")[0]
              and "--num-minibatches minibatches" in line]
    assert not ticked, ticked


def test_a_script_whose_exercises_pass_learns_cartpole():
    """The learning run that follows the exercises of ppo_discrete.py (3, 4, 6, 10 and 11), on the
    reference."""
    lines = []
    grade.grade(ROOT, [ex.number for ex in LADDER if any(p.script == "ppo_discrete" for p in ex.parts)],
                learning=True, out=lines.append)
    (line,) = [line for line in lines if "learns" in line]
    assert line.startswith("  ✓ ppo_discrete.py learns CartPole-v1"), line


GAE_DELTA = "deltas = rewards + gamma * (1.0 - terminations) * next_values - values"
GAE_RECURSION = "next_advantage = deltas[t] + gamma * gae_lambda * not_dones[t] * next_advantage"
# Planted in vpg.py's compute_gae: (reference code, wrong code, the mistake the first failure names)
GAE_MISTAKES = {
    "gamma-in-delta": (GAE_DELTA, GAE_DELTA.replace("gamma * ", ""), "γ is missing from δ_t"),
    "gamma-in-recursion": (GAE_RECURSION, GAE_RECURSION.replace("gamma * ", ""), "γ is missing from the recursion"),
    "lambda": (GAE_RECURSION, GAE_RECURSION.replace(" * gae_lambda", ""), "λ is missing from the recursion"),
    "forward-in-time": ("for t in reversed(range(rewards.shape[0])):", "for t in range(rewards.shape[0]):",
                        "the recursion runs forward in time"),
    "sign-of-V": (GAE_DELTA, GAE_DELTA.replace("- values", "+ values"), "V(s_t) has the wrong sign in δ_t"),
    "termination-for-done": ("gamma * (1.0 - terminations) * next_values",
                             "gamma * (1.0 - torch.maximum(terminations, truncations)) * next_values",
                             "termination and truncation are mixed up"),
    "truncation-for-termination": (GAE_DELTA, GAE_DELTA.replace("- terminations", "- truncations"),
                                   "termination and truncation are mixed up"),
    # CleanRL's loop reads dones[t + 1], the flag stored with the next observation: copied here,
    # the mask of step t is the done flag of step t + 1
    "mask-of-next-step": (GAE_RECURSION, GAE_RECURSION.replace(
        "not_dones[t]", "(not_dones[t + 1] if t + 1 < len(not_dones) else 1.0)"),
        "the recursion masks step t with the done flag of step t + 1"),
    "returns-not-A-plus-V": ("return advantages, advantages + values", "return advantages, advantages + next_values",
                             "your advantages are right, but your returns are not A + V"),
}


def only_named(lines: list[str], script: str, mistake: str) -> None:
    """The grader's lines for one planted mistake: a single ✗ line, for `script` alone, which names
    it; the later checks that fail are counted in one line, not listed; no line is printed twice."""
    failures = [line for line in lines if "✗" in line]
    assert len(failures) == 1, "\n".join(failures)  # no cascade, no second, false cause
    assert failures[0].startswith(f"  ✗ {script}.py: ") and mistake in failures[0], failures[0]
    assert not any("may follow from" in line for line in lines), lines
    assert len(lines) == len(set(lines)), lines


@pytest.mark.parametrize("planted", GAE_MISTAKES)
def test_the_grader_names_a_gae_mistake_and_claims_nothing_else(planted, tmp_path):
    """The first failing check names the planted mistake, and nothing else is claimed: no second,
    false cause is printed (a termination counted for every episode end does not make the
    advantages run into the next episode), and the later failures are only counted."""
    right, wrong, mistake = GAE_MISTAKES[planted]
    plant(tmp_path, "vpg", (right, wrong))
    lines = []
    assert not grade.grade(tmp_path, [4], learning=False, out=lines.append)[4]
    only_named(lines, "vpg", f": {mistake}")


# Agent.unroll run one step a call: each step is a stretch of its own
CUTS = "        cuts = [t for t in range(1, obs.shape[0]) if episode_starts[t].any()]\n"
UNPACK = "h_actor, c_actor, h_critic, c_critic = (x.contiguous() for x in state[None].chunk(4, 2))"
PACK = "state = torch.cat([h_actor, c_actor, h_critic, c_critic], dim=-1)[0]"
H_ONLY = """            h_a, c_a, h_c, c_c = state.chunk(4, -1)
            keep = (1.0 - episode_starts[begin])[:, None]
            state = torch.cat([h_a * keep, c_a, h_c * keep, c_c], -1)
"""
STEP_BY_STEP = ("cuts = [t for t in range(1, obs.shape[0]) if episode_starts[t].any()]", "cuts = list(range(1, obs.shape[0]))")
DETACHED = "the state is detached inside the unroll: the gradient does not flow back through time"
# Planted in ppo_discrete.py's ppo_loss and ppo_recurrent.py's Agent.unroll: (exercise, script, edits, the mistake
# the first failure names)
NAMED_MISTAKES = {
    "ratio-of-log-probs": (6, "ppo_discrete", [("ratio = logratio.exp()", "ratio = new_logprob / old_logprob")],
                           "the ratio divides the log-probabilities"),
    "min-in-value-clip": (6, "ppo_discrete", [("torch.max(v_loss_unclipped", "torch.min(v_loss_unclipped")],
                          "the value clip takes a min where it must take the max"),
    "detached-each-step": (13, "ppo_recurrent", [STEP_BY_STEP, (RESET, RESET.replace("state * ", "state.detach() * "))],
                           DETACHED),
    "detached-each-stretch": (13, "ppo_recurrent", [(RESET, RESET.replace("state * ", "state.detach() * "))], DETACHED),
    "zero-state-step-by-step": (13, "ppo_recurrent", [STEP_BY_STEP, (
        "        actor_out, critic_out = [], []\n",
        "        actor_out, critic_out = [], []\n        state = torch.zeros_like(state)\n")],
        "your unroll replays from a zero state"),
    # Issue 72, item 3: each named only where the unroll computes that mistake (grade.unrolled's mistakes)
    "reset-after-the-step": (13, "ppo_recurrent", [STEP_BY_STEP, (RESET + UNROLL_STEP, UNROLL_STEP + RESET)],
                             "the state is reset after the step where an episode starts"),
    "h-reset-c-kept": (13, "ppo_recurrent", [(RESET, H_ONLY)], "only h is reset at an episode start"),
    "one-call-reset-at-0": (13, "ppo_recurrent", [(CUTS, "        cuts = []\n")],
                            "the state is reset before step 0 alone"),
    "repacked-state": (13, "ppo_recurrent", [(UNPACK, UNPACK.replace("c_actor, h_critic", "h_critic, c_actor")),
                                             (PACK, PACK.replace("c_actor, h_critic", "h_critic, c_actor"))],
                       "your unroll reads the state in another order"),
}


@pytest.mark.parametrize("edits", [
    [(RESET, RESET.replace("episode_starts[begin]", "episode_starts[max(begin - 1, 0)]"))],  # the flag of a step before
    [(RESET + UNROLL_STEP, UNROLL_STEP + RESET)]],  # reset after a stretch, not after a step
    ids=["flag-of-the-step-before", "reset-after-the-stretch"])
def test_an_unroll_mistake_that_is_none_of_the_named_ones_is_located_not_named(edits, tmp_path):
    """Exercise 13's checks name a mistake only where the unroll computes it: another mistake at an
    episode start is located (which env, from which step), with no cause claimed."""
    plant(tmp_path, "ppo_recurrent", *edits)
    lines = []
    assert not grade.grade(tmp_path, [13], learning=False, out=lines.append)[13]
    failures = "\n".join(line for line in lines if "✗" in line or "found" in line)
    assert re.search(r"outputs of the (actor|critic|actor and the critic) LSTM differ from step", failures) or (
        "differs" in failures), failures
    for name in ("reset after the step", "before the step, not after it", "only h is reset", "before step 0 alone",
                 "another order", "zero state", "no reset at episode starts"):
        assert name not in failures, failures


@pytest.mark.parametrize("planted", NAMED_MISTAKES)
def test_the_grader_names_a_loss_or_unroll_mistake_and_claims_nothing_else(planted, tmp_path):
    """A ratio of log-probabilities, a min in the value clip, a state detached inside the unroll
    (which leaves its outputs right but cuts the gradient through time), an unroll step by step
    from a zero state: the first failing check names the mistake, and the later ones are counted."""
    number, script, edits, mistake = NAMED_MISTAKES[planted]
    plant(tmp_path, script, *edits)
    lines = []
    assert not grade.grade(tmp_path, [number], learning=False, out=lines.append)[number]
    only_named(lines, script, f": {mistake}")


def test_a_mistake_copied_into_every_file_is_named_once(tmp_path):
    """The same mistake in the four copies of compute_gae gives one message, which names the four
    files."""
    gae = ["vpg", "trpo", "ppo_discrete", "ppo_continuous"]
    for name in SCRIPTS:
        source = (ROOT / f"{name}.py").read_text()
        if name in gae:
            assert source.count(GAE_DELTA) == 1, name
            source = source.replace(GAE_DELTA, GAE_DELTA.replace("gamma * ", ""))
        (tmp_path / f"{name}.py").write_text(source)
    lines = []
    assert not grade.grade(tmp_path, [4], learning=False, out=lines.append)[4]
    failures = [line for line in lines if "✗" in line]
    assert failures == [f"  ✗ {', '.join(f'{s}.py' for s in gae)}: {failures[0].split(': ', 1)[1]}"], failures
    assert "γ is missing from δ_t" in failures[0], failures[0]
    assert not any("may follow from" in line for line in lines) and len(lines) == len(set(lines)), lines


EPOCH_START = "        for _epoch in range(args.update_epochs):\n            b_inds = torch.randperm(batch_size, device=device)\n"
EPOCH_KL = "            if args.target_kl is not None and epoch_kl > args.target_kl:\n                break\n"
ACCEPTABLE = ("return (mean_kl(agent, obs, old) <= args.max_kl\n"
              "                and surrogate(new_logprob, old_logprob, advantages) > objective)")
# Planted in a block inside train or trpo_step, or in line_search: (exercise, script, reference code,
# wrong code, the mistake the first failure of that script names)
BLOCK_MISTAKES = {
    "reset-value": (10, "vpg", 'final_obs_np = np.stack(infos["final_obs"][idx])', "final_obs_np = next_obs_np[idx]",
                    "bootstrapped with V of the reset observation, the next episode's first"),
    "zero-at-truncation": (10, "vpg", "final_values_np[step, idx] = agent.get_value(final_obs).cpu().numpy()",
                           "final_values_np[step, idx] = 0.0", "bootstrapped with 0, as if the episode had terminated"),
    "batch-end-terminates": (10, "vpg", "next_values = torch.cat([values[1:], next_value[None]])",
                             "next_values = torch.cat([values[1:], torch.zeros_like(next_value)[None]])",
                             "The rollout's end cuts the episode, it does not end it"),
    "shifted-back": (10, "vpg", "next_values = torch.cat([values[1:], next_value[None]])",
                     "next_values = torch.cat([next_value[None], values[:-1]])", "next_values is shifted the wrong way"),
    "same-step": (10, "vpg", "next_values = torch.cat([values[1:], next_value[None]])", "next_values = values.clone()",
                  "next_values[t] is V(s_t), the value of the same step"),
    "with-gradient": (10, "vpg", "with torch.no_grad():\n            next_obs = torch.from_numpy(next_obs_np)",
                      "if True:\n            next_obs = torch.from_numpy(next_obs_np)", "next_values carries a gradient"),
    "own-value-at-batch-end": (10, "vpg", "next_values = torch.cat([values[1:], next_value[None]])",
                               "next_values = torch.cat([values[1:], values[-1:]])",
                               "the batch's last step is bootstrapped with V(s_{T−1}), its own value"),
    "final-obs-updates-statistics": (10, "ppo_continuous", "agent.normalize_obs(final_obs_np, update=False)",
                                     "agent.normalize_obs(final_obs_np, update=True)",
                                     "the final observation updates the running statistics"),
    "raw-final-obs": (10, "ppo_continuous",
                      "                    final_obs_np = agent.normalize_obs(final_obs_np, update=False)\n", "",
                      "the final observation is not normalised"),
    "same-split": (11, "ppo_discrete", EPOCH_START,
                   "        b_inds = torch.randperm(batch_size, device=device)\n"
                   "        for _epoch in range(args.update_epochs):\n",
                   "the minibatches hold the same samples every epoch"),
    "part-of-batch": (11, "ppo_discrete", "for start in range(0, batch_size, minibatch_size):",
                      "for start in range(0, batch_size - minibatch_size, minibatch_size):",
                      "an epoch visits 96 of the batch's 128 samples"),
    "with-replacement": (11, "ppo_discrete", "b_inds = torch.randperm(batch_size, device=device)",
                         "b_inds = torch.randint(batch_size, (batch_size,), device=device)", "drawn with replacement"),
    "one-epoch": (11, "ppo_discrete", "for _epoch in range(args.update_epochs):", "for _epoch in range(1):",
                  "an update runs one epoch"),
    "stored-by-position": (11, "ppo_discrete", "b_logprobs[mb_inds]", "b_logprobs[start:start + minibatch_size]",
                           "index every batch tensor with the same minibatch indices"),
    "not-normalised": (11, "ppo_discrete", "                if args.norm_adv:\n", "                if False:\n",
                       "the advantages are not normalised within each minibatch"),
    "not-clipped": (11, "ppo_discrete", "nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)", "pass",
                    "the gradient is not clipped to --max-grad-norm"),
    "never-stops": (11, "ppo_discrete", EPOCH_KL, EPOCH_KL.replace("break", "pass"), "--target-kl never stops an update"),
    "stops-before": (11, "ppo_discrete", EPOCH_START,
                     EPOCH_START.replace("            b_inds", "            if args.target_kl is not None:\n"
                                                           "                break\n            b_inds"),
                     "an update took no step at all"),
    "per-minibatch": (11, "ppo_discrete", "                epoch_stats.append(stats)\n",
                      "                epoch_stats.append(stats)\n"
                      '                if args.target_kl is not None and stats["approx_kl"] > args.target_kl:\n'
                      "                    break\n", "the early stop acts inside an epoch"),
    # π_old recomputed from the policy being updated: the ratio is 1 and the KL 0 at every step
    "stale-old-logprob": (11, "ppo_discrete", "b_logprobs[mb_inds]", "new_logprob.detach()", "π_old is stale"),
    "no-square-root": (12, "trpo", ".clamp_min(1e-30)) ** 0.5 * x", ".clamp_min(1e-30)) * x",
                       "the square root is missing"),
    "no-factor-2": (12, "trpo", "full_step = (2 * args.max_kl /", "full_step = (args.max_kl /",
                    "the factor 2 is missing"),
    "zero-over-zero": (12, "trpo", "(x @ fvp(x)).clamp_min(1e-30)", "(x @ fvp(x))", "your full step is NaN"),
    "never-shrinks": (12, "trpo", "old_params + backtrack_coef**k * full_step", "old_params + full_step",
                      "every try takes the same step"),
    "from-last-try": (12, "trpo", "old_params + backtrack_coef**k * full_step",
                      "nn.utils.parameters_to_vector(params) + backtrack_coef**k * full_step",
                      "each try starts from the previous one"),
    "one-past": (12, "trpo", "            return k\n", "            return k + 1\n",
                 "the line search does not keep the first accepted try"),
    "not-restored": (12, "trpo", "    nn.utils.vector_to_parameters(old_params, params)\n    return backtrack_iters",
                     "    return backtrack_iters", "θ was left at the last try"),
    "kl-unchecked": (12, "trpo", ACCEPTABLE, "return surrogate(new_logprob, old_logprob, advantages) > objective",
                     "a step that leaves the trust region (mean KL > δ) is accepted"),
    "surrogate-unchecked": (12, "trpo", ACCEPTABLE, "return mean_kl(agent, obs, old) <= args.max_kl",
                            "a step that lowers the surrogate is accepted"),
}


@pytest.mark.parametrize("planted", BLOCK_MISTAKES)
def test_the_grader_names_a_mistake_in_a_block_first(planted, tmp_path):
    """Exercises 10-12: the first failing check of the planted script names the mistake, the later
    failures there are only counted, and the exercise's other scripts pass."""
    number, script, right, wrong, mistake = BLOCK_MISTAKES[planted]
    plant(tmp_path, script, (right, wrong))
    lines = []
    assert not grade.grade(tmp_path, [number], learning=False, out=lines.append)[number]
    only_named(lines, script, mistake)


# The statistics of the update, collected by a line one loop too far in or out: (right, wrong,
# the words that name it), or None where the mistake is none of the named ones.
LOGGED_MEANS = {
    "last-epoch-only": (KL_STOP_AFTER_EPOCH, KL_STOP_AFTER_EPOCH.replace("            update_stats += epoch_stats\n", "")
                        + "        update_stats += epoch_stats\n", "only the last epoch's minibatches"),
    "last-minibatch-of-each-epoch": ("                epoch_stats.append(stats)\n", "            epoch_stats.append(stats)\n",
                                     "only the last minibatch of each epoch"),
    "epoch-list-never-emptied": (EPOCH_HEAD, "        epoch_stats = []\n"
                                 + EPOCH_HEAD.replace("            epoch_stats = []\n", ""),
                                 "each epoch's minibatches again in every later epoch"),
    "first-minibatch-left-out": ("update_stats += epoch_stats\n", "update_stats += epoch_stats[1:]\n", None),
}


@pytest.mark.parametrize("planted", LOGGED_MEANS)
def test_logged_losses_that_average_the_wrong_minibatches_are_named_only_when_they_match(planted, tmp_path):
    """The check that each logged loss is its mean over every minibatch step of the update, run
    alone on ppo_discrete.py with a line that collects the statistics misplaced. Three collections
    are named where the logged numbers match them. Another (each epoch's first minibatch left out)
    is located: which update and which loss differ, with no cause claimed."""
    right, wrong, name = LOGGED_MEANS[planted]
    plant(tmp_path, "ppo_discrete", (right, wrong))
    module = grade.isolated(tmp_path, "ppo_discrete", 11, tmp_path)
    passed, detail = grade.run_check(module, grade.logged_losses_average_every_minibatch)
    assert not passed
    if name:
        assert detail.startswith("named: the logged losses average " + name), detail
    else:
        assert not detail.startswith("named:") and "minibatch steps is" in detail, detail


def test_the_reference_logs_each_loss_as_its_mean_over_every_minibatch_step(tmp_path):
    plant(tmp_path, "ppo_discrete")
    module = grade.isolated(tmp_path, "ppo_discrete", 11, tmp_path)
    assert grade.run_check(module, grade.logged_losses_average_every_minibatch) == (True, "")


@pytest.mark.parametrize("script", ["ppo_discrete", "ppo_continuous"])
def test_cleanrls_last_minibatch_kl_stop_passes_without_a_message(script, tmp_path):
    """CleanRL stops the epochs once the approx_kl of an epoch's last minibatch exceeds
    --target-kl: a legitimate choice, which the grader accepts beside the epoch's mean."""
    plant(tmp_path, script, ('epoch_kl = torch.stack([s["approx_kl"] for s in epoch_stats]).mean()',
                             'epoch_kl = epoch_stats[-1]["approx_kl"]'))
    lines = []
    assert grade.grade(tmp_path, [11], learning=False, out=lines.append)[11], "\n".join(lines)
    assert not any("✗" in line for line in lines), lines


def test_the_checks_of_a_block_run_the_reference_for_the_other_exercises(tmp_path):
    """Exercise 10 runs vpg.py's train, through the policy of exercise 3: a mistake there that
    breaks the rollout is not exercise 10's, whose checks run the reference's policy."""
    plant(tmp_path, "vpg", ("logprob = log_pi.gather(-1, action[:, None]).squeeze(-1)", "logprob = log_pi.gather(-1, action)"))
    agent = grade.load(tmp_path, "vpg").Agent(3, gym.spaces.Discrete(2))
    with pytest.raises(RuntimeError):  # the planted policy cannot act
        agent.get_action(torch.zeros(2, 3))
    lines = []
    assert grade.grade(tmp_path, [10], learning=False, out=lines.append)[10], "\n".join(lines)


# Right answers written otherwise than the reference's: (exercise, script, {anchor or name: code}),
# each code put in place of the part's region (its comment lines go with it).
OTHERWISE = [
    (10, "vpg", {"if truncated.any():": """\
                for i in range(args.num_envs):  # one env at a time
                    if truncated[i]:
                        last = torch.tensor(infos["final_obs"][i], dtype=torch.float32, device=device)
                        final_values_np[step, i] = agent.get_value(last[None]).item()""",
                 "next_value = agent.get_value(next_obs)": """\
        next_values = torch.empty_like(values)  # filled in place
        next_values[:-1] = values[1:]
        next_values[-1] = agent.get_value(torch.from_numpy(next_obs_np).to(device)).detach()
        next_values[truncations.bool()] = final_values[truncations.bool()]"""}),
    (11, "ppo_discrete", {"for _epoch in range(args.update_epochs):": """\
        epoch = 0
        while epoch < args.update_epochs:  # NumPy's permutations, the KL averaged by hand
            kls = []
            for mb_inds in torch.as_tensor(np.random.permutation(batch_size), device=device).split(minibatch_size):
                _, new_logprob, entropy, new_value = agent.get_action_and_value(b_obs[mb_inds], b_actions[mb_inds])
                mb_advantages = b_advantages[mb_inds]
                if args.norm_adv:
                    mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)
                loss, stats = ppo_loss(new_logprob, b_logprobs[mb_inds], mb_advantages, new_value, b_values[mb_inds],
                                       b_returns[mb_inds], entropy, args.clip_coef, args.clip_vloss, args.ent_coef,
                                       args.vf_coef)
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
                optimizer.step()
                update_stats.append(stats)
                kls.append(stats["approx_kl"].item())
            epoch += 1
            if args.target_kl is not None and sum(kls) / len(kls) > args.target_kl:
                break"""}),
    (12, "trpo", {"full_step = ": """\
    xhx = x @ fvp(x)  # no clamp: a zero x is caught here
    full_step = x * torch.sqrt(2 * args.max_kl / xhx) if xhx > 0 else torch.zeros_like(x)""",
                  "trpo_step.acceptable": """\
        if mean_kl(agent, obs, old) > args.max_kl:
            return False
        return bool(surrogate(agent.get_action(obs, actions)[1], old_logprob, advantages) > objective)""",
                  "line_search": """\
    saved, scale = [p.detach().clone() for p in params], 1.0  # a copy of each weight, no flat vector
    for k in range(backtrack_iters):
        offset = 0
        for p, old in zip(params, saved, strict=True):
            p.copy_(old + scale * full_step[offset:offset + p.numel()].view_as(p))
            offset += p.numel()
        if acceptable():
            return k
        scale *= backtrack_coef
    for p, old in zip(params, saved, strict=True):
        p.copy_(old)
    return backtrack_iters"""}),
]


@pytest.mark.parametrize("number,script,answers", OTHERWISE, ids=[f"{o[0]}-{o[1]}" for o in OTHERWISE])
def test_a_right_answer_written_otherwise_passes(number, script, answers, tmp_path):
    """The checks of exercises 10-12 test what the code does, not how it is written: a per-env
    loop, a tensor filled in place, NumPy's permutations and a while loop, torch.sqrt, a line
    search over copies of the weights all pass."""
    plant(tmp_path, script)
    lines = (tmp_path / f"{script}.py").read_text().split("\n")
    tree = ast.parse("\n".join(lines))
    (ex,) = [ex for ex in LADDER if ex.number == number]
    regions = []
    for part in [p for p in ex.parts if p.script == script]:
        key = part.block[0] if part.block else part.name
        start, end, _ = make.region(lines, make.find(tree, part.name), part.branch, part.block)
        regions.append((start, end, answers.pop(key).split("\n")))
    assert not answers  # each answer took a part's place
    for start, end, code in sorted(regions, reverse=True):
        lines[start - 1:end] = code
    (tmp_path / f"{script}.py").write_text("\n".join(lines))
    out = []
    assert grade.grade(tmp_path, [number], learning=False, out=out.append)[number], "\n".join(out)
