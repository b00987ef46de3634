"""docs/derivations.html: every link from an equation lands on a line that computes it, every
`# math:` line of the scripts links back to a place whose section links the code beside it, a
mapping that no longer resolves stops the build, and the page builds from the repository's files
alone."""

import html
import re
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT

sys.path.insert(0, str(ROOT / "docs"))
import build  # noqa: E402
import derivations  # noqa: E402

# What the code links of each equation must land on: equation id -> script -> text that the lines
# computing it hold. Every link of the equation to that script lands on a line holding one of
# them, and each of them is linked. Written out here, apart from derivations.py's own patterns, so
# that a mapping pointed at the wrong line goes red.
CRITIC = ["vpg", "trpo", "ppo_discrete", "ppo_continuous", "ppo_atari", "ppo_recurrent"]
PPO = ["ppo_discrete", "ppo_continuous", "ppo_atari", "ppo_recurrent"]


def on(scripts, *texts):
    return {script: list(texts) for script in scripts}


ENTROPY = {"discrete": "entropy = -(log_pi * log_pi.softmax(-1)).sum(-1)",
           "gaussian": "entropy = (0.5 + 0.5 * math.log(2 * math.pi) + std.log()).sum(-1)"}
COMPUTES = {
    "eq-discounted-rtg": on(["reinforce"], "next_return = rewards[t] + gamma * (1.0 - dones[t]) * next_return"),
    "eq-reinforce-estimate": on(["reinforce"], "return -(logprob * returns).mean()"),
    "eq-reinforce-loss": on(["reinforce"], "return -(logprob * returns).mean()"),
    "eq-vpg-loss": on(["vpg"], "return -(logprob * advantages).mean()"),
    "eq-critic-loss": on(["vpg", "trpo"], "return ((value - returns) ** 2).mean()"),
    "eq-normalise-advantages": {**on(["reinforce"], "b_returns = (b_returns - b_returns.mean())"),
                                **on(["vpg", "trpo"], "b_advantages = (b_advantages - b_advantages.mean())"),
                                **on(PPO, "mb_advantages = ((mb_advantages - mb_advantages.mean())")},
    "eq-td-residual": on(CRITIC, "deltas = rewards + gamma * (1.0 - terminations) * next_values - values"),
    "eq-gae-recursion": on(CRITIC, "next_advantage = deltas[t] + gamma * gae_lambda * not_dones[t] * next_advantage"),
    "eq-gae-returns": {**on(["vpg", "trpo"], "return advantages, advantages + values", "_, returns = compute_gae("),
                       **on(PPO, "return advantages, advantages + values", "advantages, returns = compute_gae(")},
    "eq-gae-episode-ends": {**on(CRITIC, "deltas = rewards + gamma * (1.0 - terminations) * next_values",
                                 "not_dones = 1.0 - torch.maximum(terminations, truncations)",
                                 "next_values = torch.cat([values[1:], next_value[None]])",
                                 "next_values = torch.where(truncations.bool(), final_values, next_values)"),
                            **on(["ppo_recurrent"], "deltas = rewards + gamma * (1.0 - terminations) * next_values",
                                 "not_dones = 1.0 - torch.maximum(terminations, truncations)",
                                 "next_values = torch.cat([values[1:], next_value])",
                                 "next_values = torch.where(truncations.bool(), final_values, next_values)")},
    "eq-ratio": {**on(PPO, "logratio = new_logprob - old_logprob", "ratio = logratio.exp()"),
                 **on(["trpo"], "(logprob - old_logprob).exp()")},
    "eq-surrogate": on(["trpo"], "return ((logprob - old_logprob).exp() * advantages).mean()"),
    "eq-surrogate-gradient": on(["trpo"], "g = flat_grad(objective, params)"),
    "eq-trust-region": on(["trpo"], "return kl.sum(-1).mean()"),
    "eq-damped-step": on(["trpo"], "x = conjugate_gradient(fvp, g, 10)", "full_step = (2 * args.max_kl / (x @ fvp(x))"),
    "eq-fisher-vector": on(["trpo"], "kl_grad = flat_grad(kl, params, create_graph=True)",
                           "flat_grad(kl_grad @ v, params, retain_graph=True) + damping * v"),
    "eq-conjugate-gradient": on(["trpo"], "alpha = r_dot_r / (p @ Ap)", "x, r = x + alpha * p, r - alpha * Ap",
                                "p, r_dot_r = r + (new_r_dot_r / r_dot_r) * p"),
    "eq-line-search": on(["trpo"], "old_params + backtrack_coef**k * full_step", "mean_kl(agent, obs, old) <= args.max_kl",
                         "line_search(params, full_step, acceptable, 0.8, 10)"),
    "eq-clip": on(PPO, "torch.clamp(ratio, 1 - clip_coef, 1 + clip_coef)",
                  "torch.min(ratio * advantages, clipped_ratio * advantages)"),
    "eq-clip-gradient": on(PPO, "torch.min(ratio * advantages, clipped_ratio * advantages)"),
    "eq-ppo-loss": on(PPO, "pg_loss = -surrogate(ratio, advantages, clip_coef)",
                      "loss = pg_loss + vf_coef * v_loss - ent_coef * entropy_loss"),
    "eq-value-clip": on(PPO, "old_value + torch.clamp(new_value - old_value, -clip_coef, clip_coef)",
                        "0.5 * torch.max(v_loss_unclipped, (v_clipped - returns) ** 2)"),
    "eq-log-softmax": on(["reinforce", "vpg", "trpo", "ppo_discrete", "ppo_atari", "ppo_recurrent"],
                         "log_pi = logits - logits.logsumexp(-1, keepdim=True)"),
    "eq-log-gaussian": on(["reinforce", "vpg", "trpo", "ppo_continuous", "ppo_recurrent"],
                          "log_density = (-((action - mean) ** 2) / (2 * std**2)", "logprob = log_density.sum(-1)"),
    "eq-entropy": {**on(["reinforce", "vpg", "trpo", "ppo_recurrent"], ENTROPY["discrete"], ENTROPY["gaussian"]),
                   **on(["ppo_discrete", "ppo_atari"], ENTROPY["discrete"]), **on(["ppo_continuous"], ENTROPY["gaussian"])},
    "eq-kl-closed": on(["trpo"], "kl = (logstd - old_logstd - 0.5", "kl = old_log_pi.exp() * (old_log_pi - log_pi)"),
    "eq-kl-estimators": {**on(["reinforce", "vpg"], "approx_kl = ((logratio.exp() - 1) - logratio).mean()"),
                         **on(PPO, '"old_approx_kl": (-logratio).mean(), "approx_kl": ((ratio - 1) - logratio).mean()')},
    "eq-running-moments": on(["ppo_continuous", "ppo_recurrent"], "delta, total = batch_mean - self.mean",
                             "self.mean = self.mean + delta * batch_count / total",
                             "m2 = (self.var * self.count + batch_var * batch_count"),
    "eq-normalise-observation": on(["ppo_continuous", "ppo_recurrent"],
                                   "(obs - self.obs_rms.mean) / np.sqrt(self.obs_rms.var + 1e-8)"),
    "eq-reward-scaling": on(["ppo_continuous", "ppo_recurrent"],
                            "self.discounted_return = self.gamma * self.discounted_return + reward",
                            "scaled = reward / np.sqrt(self.return_rms.var + 1e-8)"),
    # the recurrent policy: its state, the gradient through time from the stored start state, the
    # replay from that state, and the reset at an episode's start
    "eq-recurrent-policy": on(["ppo_recurrent"],
                              "out, (h_actor, c_actor) = self.actor_lstm(obs[begin:end], (h_actor, c_actor))",
                              "logits = self.actor_head(actor_out)"),
    "eq-bptt": on(["ppo_recurrent"], "start_state = next_state.clone()", "loss.backward()"),
    "eq-replay": on(["ppo_recurrent"], "obs[:, mb], start_state[mb], episode_starts[:, mb], actions[:, mb])"),
    "eq-state-reset": on(["ppo_recurrent"], "state = state * (1.0 - episode_starts[begin])[:, None]",
                         "next_episode_start_np = (terminated | truncated).astype(np.float32)"),
}
# The derivation, in order: the policy-gradient theorem, reward-to-go, the baseline, GAE, the
# importance-sampled surrogate, the trust region, the clipped surrogate, the gradient through time
# of a recurrent policy, then the pieces.
SECTIONS = ["pg-theorem", "reward-to-go", "baseline", "gae", "surrogate", "trust-region", "clip", "recurrent",
            "pieces"]


@pytest.fixture(scope="module")
def pages():
    """derivations.html and the script pages, built from the working tree."""
    return {"derivations": derivations.page(), **{name: build.render(name) for name in build.SCRIPTS}}


def text(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", fragment))


def line_text(page: str, number: int) -> str | None:
    """What a script page shows on the line with the anchor line-<number>, or None if none has it."""
    m = re.search(rf'<span class="line" id="line-{number}">(.*?)(?:\n|</pre>)', page)
    return text(m[1]).removeprefix(str(number)) if m else None


def derivation_sections(page: str) -> dict[str, str]:
    return dict(re.findall(r'<section id="([\w-]+)">(.*?)</section>', page, flags=re.S))


def equation_links(page: str) -> dict[str, list[tuple[str, int]]]:
    """equation id -> the (script, line) of each code link beside it."""
    links = {}
    for section in derivation_sections(page).values():
        parts = re.split(r'<div class="dstep"(?: id="([\w-]+)")?>', section)
        for eq_id, chunk in zip(parts[1::2], parts[2::2], strict=True):
            found = [(s, int(n)) for s, n in re.findall(r'href="(\w+)\.html#line-(\d+)"', chunk)]
            assert eq_id or not found, "code links beside no equation"
            if eq_id:
                links[eq_id] = found
    return links


def test_the_derivation_goes_in_order(pages):
    assert list(derivation_sections(pages["derivations"])) == SECTIONS


def test_every_code_link_lands_on_a_line_that_computes_its_equation(pages):
    links = equation_links(pages["derivations"])
    linked = {eq_id for eq_id, found in links.items() if found}
    assert linked == set(COMPUTES), (sorted(linked - set(COMPUTES)), sorted(set(COMPUTES) - linked))
    for eq_id, found in links.items():
        if not found:
            continue
        assert {script for script, _ in found} == set(COMPUTES[eq_id]), eq_id
        hit = set()
        for script, number in found:
            shown = line_text(pages[script], number)
            assert shown is not None, f"{eq_id}: {script}.html has no anchor line-{number}"
            matches = [t for t in COMPUTES[eq_id][script] if t in shown]
            assert matches, f"{eq_id} links {script}.py line {number}, which holds {shown.strip()!r}"
            hit.update((script, t) for t in matches)
        missing = [(s, t) for s, texts in COMPUTES[eq_id].items() for t in texts if (s, t) not in hit]
        assert not missing, f"{eq_id}: no link to the line that computes {missing}"


def test_every_math_line_links_back_to_a_section_that_links_its_code(pages):
    """Each `# math:` line of every script page has its link, to an equation of derivations.html
    whose section links at least one line of the code beside that `# math:` line (its section)."""
    sections = derivation_sections(pages["derivations"])
    section_of = {eq_id: name for name, body in sections.items() for eq_id in re.findall(r'id="(eq-[\w-]+)"', body)}
    for name in build.SCRIPTS:
        page = pages[name]
        math_lines = re.findall(r"^\s*# math: ", (ROOT / f"{name}.py").read_text(), flags=re.M)
        equations = page.count('<div class="eq"><math')
        backlinks = 0
        for chunk in page.split('<div class="section')[1:]:
            notes, _, code = chunk.partition('<div class="code">')
            beside = {(name, int(n)) for n in re.findall(r'id="line-(\d+)"', code)}
            for eq_id in re.findall(r'<div class="eq"><math .*?</math><a class="derivation" href="derivations\.html#([\w-]+)"',
                                    notes, flags=re.S):
                backlinks += 1
                assert eq_id in section_of, f"{name}.html links to derivations.html#{eq_id}, which is not there"
                targets = {(s, int(n)) for s, n in re.findall(r'href="(\w+)\.html#line-(\d+)"', sections[section_of[eq_id]])}
                assert targets & beside, (f"{name}.html: the equation linked to {eq_id} sits beside lines "
                                          f"{sorted(n for _, n in beside)}, none of which §{section_of[eq_id]} links")
        assert backlinks == equations == len(math_lines) >= 4, (name, backlinks, equations, len(math_lines))


def test_every_line_that_computes_an_equation_links_back_to_it(pages):
    """Each line that derivations.html links as computing an equation sits in a section of its
    script's page whose notes link back to that equation: by a `# math:` line, or by the line of
    links under the notes. So every function that computes an equation (compute_gae,
    compute_returns, mean_kl, line_search, ...) links to its derivation; the PPO pages to GAE."""
    for eq_id, found in equation_links(pages["derivations"]).items():
        for script, number in found:
            chunk = next(c for c in pages[script].split('<div class="section')[1:] if f'id="line-{number}"' in c)
            notes = chunk.partition('<div class="code">')[0]
            assert f'href="derivations.html#{eq_id}"' in notes, f"{script}.html, line {number}: no link back to {eq_id}"
    for name in PPO:
        assert 'href="derivations.html#eq-gae-recursion"' in pages[name], name


def test_the_derivations_link_each_step_file_to_its_step(pages):
    """The text links each file of steps/ to the step of the course that brings it, on a step page
    that has that step; a link to a file that no step leads to stops the build."""
    links = re.findall(r'<a class="steplink" href="([\w-]+)\.html#(step-\d+)"[^>]*>([\w/.]+)</a>', pages["derivations"])
    linked = {shown for _, _, shown in links}
    assert {f"steps/{p.name}" for p in (ROOT / "steps").glob("*.py")} <= linked, sorted(linked)
    for page, anchor, shown in links:
        step = build.step_page(*page.split("-to-"))
        heading = re.search(rf'<h2 id="{anchor}">(.*?)</h2>', step)
        assert heading and f"→ {shown}:" in heading[1], (page, anchor, shown)
    with pytest.raises(ValueError, match="no step of the course"):
        derivations.text("{step:no_such_file}")


def test_a_mapping_that_no_longer_resolves_stops_the_build(monkeypatch):
    # a piece of text that is in no line of the definition, or in two
    for code in (derivations.Code("vpg", "compute_gae", "no such line"), derivations.Code("vpg", "compute_gae", "advantages"),
                 derivations.Code("vpg", "no_such_function", "x")):
        with pytest.raises(ValueError, match="derivations"):
            derivations.resolve(code)
    latex, eq_id = next(iter(derivations.LINKS.items()))
    # a `# math:` line whose LaTeX is in no entry
    monkeypatch.setattr(derivations, "LINKS", {k: v for k, v in derivations.LINKS.items() if k != latex})
    with pytest.raises(ValueError, match="links to no derivation"):
        for name in build.SCRIPTS:
            build.render(name)
    # an entry that no script holds any more
    monkeypatch.setattr(derivations, "LINKS", {**derivations.LINKS, latex: eq_id, r"x = \gone": eq_id})
    with pytest.raises(ValueError, match="no script's"):
        derivations.check()
    # a `# math:` line pointed at a place whose section links none of its code
    gae = next(k for k, v in derivations.LINKS.items() if v == "eq-gae-returns")
    monkeypatch.setattr(derivations, "LINKS", {**derivations.LINKS, gae: "eq-clip"})
    monkeypatch.delitem(derivations.LINKS, r"x = \gone")
    with pytest.raises(ValueError, match="links none of the code"):
        derivations.check()


def test_the_page_builds_from_the_repository_files_alone(tmp_path, pages):
    """A copy of what git tracks (and the new files it would track), without anything ignored
    (virtual environments, caches, runs), builds the same derivations.html."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        if (ROOT / name).is_file() and (name.startswith(("docs/", "tests/")) or "/" not in name):
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, tmp_path / name)
    out = subprocess.run([sys.executable, "-c", "import sys; sys.path.insert(0, 'docs'); import derivations; "
                          "open('derivations.html', 'w').write(derivations.page())"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert (tmp_path / "derivations.html").read_text() == pages["derivations"]


# Measured by the browser: elements wider than their box, and each formula's size.
OVERFLOWING = """return Array.from(document.querySelectorAll('body *')).filter(e => e.clientWidth > 0
    && e.scrollWidth > e.clientWidth + 1).map(e => e.tagName + ' in ' + ((e.closest('[id]') || {}).id || '?'))"""
SIZES = """return Array.from(document.querySelectorAll('math')).map(m =>
    [m.getBoundingClientRect().width, m.getBoundingClientRect().height])"""
# Where an element is in the window: its top and bottom, and the window's height.
IN_VIEW = "const r = document.getElementById(arguments[0]).getBoundingClientRect(); return [r.top, r.bottom, window.innerHeight]"


@pytest.mark.skipif(not (shutil.which("chromium") and shutil.which("chromedriver")),
                    reason="needs Debian's chromium and chromium-driver (.ci/run installs them)")
@pytest.mark.parametrize("width", [1366, 1920])
def test_what_a_reader_sees_in_a_real_browser(width, tmp_path, pages):
    """Every formula typeset, nothing wider than its box; a code link opens the script page at its
    line, highlighted, and a `# math:` line's link opens the derivation at its equation."""
    for name, page in pages.items():
        (tmp_path / f"{name}.html").write_text(page)
    driver = build.browser(width, 768 if width == 1366 else 1080)
    try:
        driver.get((tmp_path / "derivations.html").as_uri())
        sizes = driver.execute_script(SIZES)
        assert len(sizes) > 60 and all(w > 5 and h > 8 for w, h in sizes), sizes
        assert driver.execute_script(OVERFLOWING) == [], width
        visible = driver.find_element("tag name", "body").text
        assert "\\" not in visible  # no LaTeX left untypeset
        (script, number), *_ = equation_links(pages["derivations"])["eq-gae-recursion"]
        driver.get((tmp_path / f"{script}.html").as_uri() + f"#line-{number}")
        top, bottom, window = driver.execute_script(IN_VIEW, f"line-{number}")
        assert -1 <= top and bottom <= window + 1, (top, bottom, window)
        background = driver.execute_script(f"return getComputedStyle(document.getElementById('line-{number}')).backgroundColor")
        assert background not in ("rgba(0, 0, 0, 0)", "transparent"), background
        link = driver.find_element("css selector", 'a.derivation[href$="#eq-gae-returns"]')
        link.click()
        top, bottom, window = driver.execute_script(IN_VIEW, "eq-gae-returns")
        assert driver.current_url.endswith("derivations.html#eq-gae-returns") and -1 <= top < window, (top, window)
    finally:
        driver.quit()
