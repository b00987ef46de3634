"""exercises/: the generator cuts out exactly the listed code and nothing else; the grader passes
the reference scripts, fails a fresh copy with each exercise's hint, and names the mistake of
typical wrong implementations, two per exercise."""

import ast
import difflib
import shutil
import sys

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "exercises"))
import grade  # noqa: E402
import make  # noqa: E402
from ladder import LADDER, SCRIPTS  # noqa: E402


def listed(script: str) -> dict[str, list[str | None]]:
    out = {}
    for ex in LADDER:
        for part in ex.parts:
            if part.script == script:
                out.setdefault(part.name, []).append(part.branch)
    return out


def definitions(tree: ast.Module) -> dict[str, ast.AST]:
    """Every function and method by its dotted name."""
    out = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            out[node.name] = node
            for child in getattr(node, "body", []):
                if isinstance(child, ast.FunctionDef):
                    out[f"{node.name}.{child.name}"] = child
    return out


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
    # Every changed line of the reference lies inside a listed definition; the student copy keeps
    # its `# math:` lines and replaces the rest with `raise NotImplementedError(...)` lines.
    ref_lines, student_lines = reference.split("\n"), student.split("\n")
    inside = set()
    for name in listed(script):
        inside.update(range(ref_defs[name].lineno, ref_defs[name].end_lineno + 1))
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, ref_lines, student_lines, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        assert set(range(i1 + 1, i2 + 1)) <= inside, (tag, ref_lines[i1:i2])
        assert all("raise NotImplementedError(\"exercise " in line for line in student_lines[j1:j2]), student_lines[j1:j2]
    for line in ref_lines:
        if line.strip().startswith("# math:"):
            assert line in student_lines  # the equations stay


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


RETURNS_LOOP = "        returns[t] = next_return\n    return returns\n"
# the mistake: every step gets its episode's whole return
FULL_RETURN = RETURNS_LOOP.replace("    return returns\n", """    for t in range(1, rewards.shape[0]):
        if not dones[t - 1]:
            returns[t] = returns[t - 1]
    return returns
""")
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
]


@pytest.mark.parametrize("number,script,right,wrong,mistake", WRONG, ids=[f"{w[0]}-{w[4][:30]}" for w in WRONG])
def test_a_typical_mistake_fails_with_a_message_that_names_it(number, script, right, wrong, mistake, tmp_path):
    for name in SCRIPTS:
        shutil.copy(ROOT / f"{name}.py", tmp_path)
    source = (tmp_path / f"{script}.py").read_text()
    assert source.count(right) == 1, right
    (tmp_path / f"{script}.py").write_text(source.replace(right, wrong))
    lines = []
    passed = grade.grade(tmp_path, [number], learning=False, out=lines.append)
    assert not passed[number]
    failures = [line for line in lines if "✗" in line]
    assert any(mistake in line for line in failures), "\n".join(failures)


def test_a_script_whose_exercises_pass_learns_cartpole():
    """The learning run that follows the exercises of ppo_discrete.py (3, 4 and 6), on the reference."""
    lines = []
    grade.grade(ROOT, [3, 4, 6], learning=True, out=lines.append)
    (line,) = [line for line in lines if "learns" in line]
    assert line.startswith("  ✓ ppo_discrete.py learns CartPole-v1"), line


GAE_DELTA = "deltas = rewards + gamma * (1.0 - terminations) * next_values - values"
GAE_RECURSION = "next_advantage = deltas[t] + gamma * gae_lambda * not_dones[t] * next_advantage"
# Planted in vpg.py's compute_gae: (reference code, wrong code, the mistake the first failure names)
GAE_MISTAKES = {
    "gamma-in-delta": (GAE_DELTA, GAE_DELTA.replace("gamma * ", ""), "γ is missing from δ_t"),
    "gamma-in-recursion": (GAE_RECURSION, GAE_RECURSION.replace("gamma * ", ""), "γ is missing from the recursion"),
    "lambda": (GAE_RECURSION, GAE_RECURSION.replace(" * gae_lambda", ""), "λ is missing from the recursion"),
    "sign-of-V": (GAE_DELTA, GAE_DELTA.replace("- values", "+ values"), "V(s_t) has the wrong sign in δ_t"),
    "termination-for-done": ("gamma * (1.0 - terminations) * next_values",
                             "gamma * (1.0 - torch.maximum(terminations, truncations)) * next_values",
                             "termination and truncation are mixed up"),
    "truncation-for-termination": (GAE_DELTA, GAE_DELTA.replace("- terminations", "- truncations"),
                                   "termination and truncation are mixed up"),
}


@pytest.mark.parametrize("planted", GAE_MISTAKES)
def test_the_grader_names_a_gae_mistake_and_claims_nothing_else(planted, tmp_path):
    """The first failing check names the planted mistake; every later failure of the same file only
    points back to it, so that no second, false cause is printed (a termination counted for every
    episode end does not make the advantages run into the next episode)."""
    right, wrong, mistake = GAE_MISTAKES[planted]
    for name in SCRIPTS:
        shutil.copy(ROOT / f"{name}.py", tmp_path)
    source = (tmp_path / "vpg.py").read_text()
    assert source.count(right) == 1, right
    (tmp_path / "vpg.py").write_text(source.replace(right, wrong))
    lines = []
    assert not grade.grade(tmp_path, [4], learning=False, out=lines.append)[4]
    failures = [line for line in lines if "✗" in line]
    assert all(line.startswith("  ✗ vpg.py: ") for line in failures), failures  # the other copies pass
    first, *later = failures
    assert f": {mistake}" in first, first
    assert all(line.endswith("(may follow from the failure above: fix that first)") for line in later), later
