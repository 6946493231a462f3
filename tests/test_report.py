"""The run report: files, sections, escaping, banners, modes, regeneration and a browser check.

Real MAP fits cover the fit -> write -> report path; multi-chain posteriors are synthetic
(random draws packaged by the real :func:`posterior.to_inference_data`, with the real
convergence checks), so NUTS-only panels are tested without sampling.
"""

import builtins
import dataclasses
import io
import re
import shutil
import struct
import subprocess
import sys
import warnings
from pathlib import Path

import h5py
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from scipy import special

from bayes_dualeval.cli.commands import cli
from bayes_dualeval.core.errors import InputError, ReportWarning
from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.inference.sampling import Draws
from bayes_dualeval.inference.settings import SamplerSettings
from bayes_dualeval.model.config import load_spec
from bayes_dualeval.model.inputs import build_inputs
from bayes_dualeval.model.simulate import simulate
from bayes_dualeval.model.spec import DualEvalModel
from bayes_dualeval.posterior.diagnostics import convergence, per_parameter
from bayes_dualeval.posterior.idata import to_inference_data
from bayes_dualeval.report import document as report
from bayes_dualeval.report import panels, plots
from bayes_dualeval.report.context import ReportContext
from bayes_dualeval.runs import load, output
from bayes_dualeval.runs.fit import FitResult, fit, write_run

ROOT = Path(__file__).resolve().parent.parent
CHECKER = ROOT / "scripts" / "tools" / "check_report.py"
EVIL = "<script>alert(1)</script>"
RED = 'class="banner banner-error"'

pytestmark = pytest.mark.filterwarnings("error::bayes_dualeval.core.errors.ReportWarning")


# --------------------------------------------------------------------------- helpers


def make_dataset(
    n_models=6,
    n_static=30,
    n_arena=10,
    *,
    names=None,
    seed=1,
    reward_norm="source",
    arena_sources=1,
):
    static, arena, _ = simulate(n_models, n_static, n_arena, seed=seed)
    static["source"], arena["source"] = "bench", "arena"
    if arena_sources > 1:  # prompts split over sources with different reward scales
        k = arena["item_id"].str[-1].astype(int) % arena_sources
        arena["source"] = "arena" + k.astype(str)
        arena["reward"] = arena["reward"] * (1 + k)
    if names is not None:
        mapping = dict(zip(sorted(static["model_label"].unique()), names, strict=True))
        static["model_label"] = static["model_label"].map(mapping)
        arena["model_label"] = arena["model_label"].map(mapping)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return Dataset.from_frames(static=static, arena=arena, reward_norm=reward_norm)


def synthetic_run(
    ds, *, chains=2, draws=40, mode="both", irt="2pl", shift=0.0, seed=0, sampler="nuts"
):
    """A posterior of random draws around a random truth, packaged like a real run."""
    config = load_spec("dualeval-2pl").replace(mode=mode, irt=irt)
    if mode in ("static", "arena"):
        ds = ds.only(mode)
    elif mode == "bt":
        ds = ds.only("arena")
    inputs, pairs = build_inputs(ds, config)
    rng = np.random.default_rng(seed)
    m, q = ds.n_models, ds.n_items
    size = (chains, draws)
    theta = rng.normal(size=m) + 0.2 * rng.normal(size=(*size, m))
    theta[1:] += shift  # chains that disagree: R-hat fails
    samples = {"theta": theta}
    if mode != "bt":
        samples["b"] = rng.normal(size=q) + 0.2 * rng.normal(size=(*size, q))
        if irt != "1pl":
            samples["a"] = np.exp(0.3 * rng.normal(size=q) + 0.1 * rng.normal(size=(*size, q)))
        static = ds.item_kind == "static"  # floors and ceilings of static items only
        if irt in ("3pl", "4pl"):
            samples["c"] = np.where(static, rng.uniform(0.15, 0.3, size=(*size, q)), 0.0)
        if irt == "4pl":
            samples["d"] = np.where(static, rng.uniform(0.85, 0.95, size=(*size, q)), 1.0)
        if len(ds.arena_items):
            samples["gamma"] = 4.0 + 0.1 * rng.normal(size=size)
        if DualEvalModel(config).uses_level(inputs):
            samples["level_c"] = 0.1 * rng.normal(size=(*size, inputs.n_level_groups))
    samples = {k: np.asarray(v, np.float32) for k, v in samples.items()}
    stats = {
        "diverging": np.zeros(size, bool),
        "tree_depth": np.full(size, 3),
        "acceptance_rate": np.full(size, 0.9),
        "step_size": np.full(size, 0.1),
    }
    idata = to_inference_data(
        Draws(samples, stats if sampler == "nuts" else {}), ds, inputs, config
    )
    settings = SamplerSettings(sampler=sampler, chains=chains, draws=draws)
    diagnostics = {
        "convergence": convergence(idata, sampler).to_dict(),
        "sampler": settings.to_dict(),
        "sampler_info": {},
        "config": config.to_dict(),
        "data": ds.summary_dict(),
        "pairs": pairs.summary_dict() if pairs is not None else None,
        "timings": {},
        "created": "2026-01-01T00:00:00+00:00",
        "ci": 0.9,
    }
    parameters = per_parameter(idata) if sampler == "nuts" else None
    return FitResult(ds, pairs, config, settings, idata, diagnostics, parameters)


def write_synthetic(tmp_path, result, name="run", ci=0.9):
    """The report of ``result`` (its checks and tables computed at ``ci``) in a new folder."""
    folder = tmp_path / name
    folder.mkdir()
    if result.ci != ci:
        output.tabulate(result, ci=ci)
    return folder, report.write_report(result, folder)


def only_panels(monkeypatch, *anchors):
    """Draw only these sections (tests of one part of the report need not draw it all)."""
    chosen = tuple(p for p in panels.PANELS if p.anchor in anchors)
    monkeypatch.setattr(report, "PANELS", chosen)


def html_of(folder) -> str:
    return (Path(folder) / report.HTML_FILE).read_text(encoding="utf-8")


def section_text(text: str, anchor: str) -> str:
    """The HTML from one section heading to the next."""
    start = text.index(f'<h2 id="{anchor}">')
    nxt = text.find("<h2 ", start + 1)
    return text[start : nxt if nxt > 0 else len(text)]


def png_size(path) -> tuple[int, int]:
    data = Path(path).read_bytes()[16:24]
    return struct.unpack(">II", data)


def assert_self_contained(text: str):
    assert "http://" not in text and "https://" not in text
    assert "<script" not in text.lower()
    for value in re.findall(r'\b(?:src|href)="([^"]*)"', text):
        assert value.startswith(("data:", "#")), value


@pytest.fixture(scope="module")
def map_run(tmp_path_factory):
    """A real MAP fit of small simulated data, written by output.write (with its report)."""
    ds = make_dataset()
    result = fit(ds, settings=SamplerSettings(sampler="map"))
    out = tmp_path_factory.mktemp("map") / "run"
    output.write(result, out, ci=0.9)
    return result, out


@pytest.fixture(scope="module")
def nuts_like(tmp_path_factory):
    ds = make_dataset(seed=2)
    result = synthetic_run(ds)
    folder, paths = write_synthetic(tmp_path_factory.mktemp("nuts"), result)
    return result, folder, paths


# --------------------------------------------------------------------------- files, sections


def test_fit_writes_report_with_every_section(map_run):
    _, out = map_run
    text = html_of(out)
    md = (out / report.MD_FILE).read_text(encoding="utf-8")
    for anchor, title in report.SECTIONS.items():
        assert f'<h2 id="{anchor}">{title}</h2>' in text
        assert f"## {title}" in md
    assert_self_contained(text)
    assert text.count("data:image/png;base64,") >= 4
    # every figure the Markdown links exists beside it
    links = re.findall(r"\]\((figures/[^)]+\.png)\)", md)
    assert links and all((out / link).is_file() for link in links)
    for name in ("leaderboard.csv", "pairwise.csv", "posterior.nc", "diagnostics.json"):
        assert (out / name).is_file()


def test_map_report_says_why_interval_panels_are_skipped(map_run):
    _, out = map_run
    text = html_of(out)
    assert 'class="banner banner-info"' in text and "MAP point estimate" in text
    assert "single draw" in section_text(text, "ranks")
    assert "rank_heatmap.png" not in (out / report.MD_FILE).read_text(encoding="utf-8")
    assert "Not applicable" in section_text(text, "diagnostics")
    assert RED not in text
    # the leaderboard lists every model, without interval columns
    board = section_text(text, "leaderboard")
    assert "interval" not in board.split("<table>")[1]
    for model in map_run[0].dataset.models:
        assert f">{model}<" in board


def test_nuts_like_report_has_interval_panels_and_diagnostics(nuts_like):
    result, folder, paths = nuts_like
    names = {p.name for p in paths}
    for figure in (
        "forest",
        "rank_heatmap",
        "wright_map",
        "icc",
        "difficulty_discrimination",
        "ppc_models",
        "ppc_items",
        "calibration",
        "rhat_ess",
        "rank_plots",
    ):
        assert f"{figure}.png" in names
    text = html_of(folder)
    assert "90% interval" in section_text(text, "leaderboard")
    diag = section_text(text, "diagnostics")
    assert "max R-hat" in diag and "divergences per chain" in diag
    anomalies = section_text(text, "anomalies")
    assert anomalies.count("<tr") == panels.checks.TOP_ANOMALIES + 1  # header + rows
    # the model x benchmark audit: the top blocks, and every flagged one, most suspicious first
    table = result.tables["contamination"]
    shown = max(panels.checks.TOP_BLOCKS, int((table["q_value"] < 0.05).sum()))
    audit = section_text(text, "contamination")
    assert audit.count("<tr") == min(shown, len(table)) + 1
    assert audit.index(f">{table['model'].iloc[0]}<") < audit.index("</table>")
    assert "contamination.csv" in audit
    assert_self_contained(text)


def test_convergence_failure_shows_red_banner_with_problems(tmp_path, monkeypatch):
    only_panels(monkeypatch, "leaderboard", "diagnostics")
    result = synthetic_run(make_dataset(seed=3), shift=1.5)
    conv = result.diagnostics["convergence"]
    assert conv["converged"] is False  # the real check fails on chains that disagree
    folder, _ = write_synthetic(tmp_path, result)
    text = html_of(folder)
    banner = text[text.index(RED) :]
    banner = banner[: banner.index("</div>")]
    assert "Convergence failed" in banner
    assert "R-hat" in banner
    assert text.index(RED) < text.index('<h2 id="leaderboard">')
    assert "NOT converged" in section_text(text, "diagnostics")


def test_faked_diagnostics_banner_lists_each_problem(nuts_like, tmp_path, monkeypatch):
    only_panels(monkeypatch)  # the banners are in the header
    result = nuts_like[0]
    conv = {
        **result.diagnostics["convergence"],
        "converged": False,
        "problems": ["3 divergent transition(s) <b>", "only one chain"],
    }
    faked = dataclasses.replace(result, diagnostics={**result.diagnostics, "convergence": conv})
    folder = tmp_path / "run"
    folder.mkdir()
    report.write_report(faked, folder)
    text = html_of(folder)
    assert "<li>3 divergent transition(s) &lt;b&gt;</li>" in text
    assert "<li>only one chain</li>" in text
    md = (folder / report.MD_FILE).read_text(encoding="utf-8")
    assert "Convergence failed" in md
    # and a converged run has no banner
    conv = {**conv, "converged": True, "problems": []}
    fixed = dataclasses.replace(result, diagnostics={**result.diagnostics, "convergence": conv})
    report.write_report(fixed, folder)
    assert RED not in html_of(folder)


def test_svi_report_says_diagnostics_are_unavailable(tmp_path):
    result = synthetic_run(make_dataset(seed=4), chains=1, draws=50, sampler="svi")
    result.diagnostics["sampler_info"] = {
        "steps": 300,
        "converged": False,
        "loss_trace": [[0, 900.0], [150, 400.0], [299, 390.0]],
    }
    folder, paths = write_synthetic(tmp_path, result)
    text = html_of(folder)
    assert "SVI: approximate posterior" in text and "did not settle" in text
    assert "covered 23-93%" in text and "random batch" not in text
    diag = section_text(text, "diagnostics")
    assert "Unavailable" in diag and "loss_trace.png" in {p.name for p in paths}
    assert "rank_plots.png" not in {p.name for p in paths}


def test_svi_report_says_when_steps_read_random_batches(tmp_path):
    result = synthetic_run(make_dataset(seed=4), chains=1, draws=50, sampler="svi")
    result.diagnostics["sampler_info"] = {"steps": 300, "converged": True, "static_batch": 262144}
    folder, _ = write_synthetic(tmp_path, result)
    assert "random batch of 262,144 static cells" in html_of(folder)


# --------------------------------------------------------------------------- escaping


def test_labels_are_escaped_everywhere(tmp_path):
    names = [EVIL, 'a&b "quoted"', "m|pipe*star_", "d", "e", "f"]
    ds = make_dataset(names=names, seed=5)
    assert EVIL in ds.models
    result = synthetic_run(ds)
    folder, _ = write_synthetic(tmp_path, result)
    text = html_of(folder)
    assert EVIL not in text
    assert "<script" not in text.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert "a&amp;b &quot;quoted&quot;" in text
    md = (folder / report.MD_FILE).read_text(encoding="utf-8")
    assert EVIL not in md and "&lt;script&gt;" in md
    # a pipe in a label must not split a Markdown table cell
    assert r"m\|pipe\*star\_" in md


# --------------------------------------------------------------------------- modes


@pytest.mark.parametrize(
    ("mode", "irt", "absent", "note"),
    [
        ("arena", "2pl", (), None),
        ("bt", "2pl", ("wright_map", "icc", "difficulty_discrimination"), "Bradley-Terry"),
        ("both", "1pl", ("icc", "difficulty_discrimination"), "Rasch"),
        ("both", "3pl", (), None),
        ("static", "4pl", (), None),
    ],
)
def test_modes_report_without_failing_panels(tmp_path, mode, irt, absent, note):
    result = synthetic_run(make_dataset(seed=6), mode=mode, irt=irt)
    folder, paths = write_synthetic(tmp_path, result)
    names = {p.stem for p in paths}
    assert {"forest", "rank_heatmap"} <= names
    for figure in absent:
        assert figure not in names
    text = html_of(folder)
    for anchor in report.SECTIONS:
        assert f'<h2 id="{anchor}">' in text
    assert "could not be drawn" not in text
    if note:
        assert note in text
    if mode == "static":
        assert "Arena pairs" not in section_text(text, "ppc")


def _facts(section: str) -> dict:
    """The two-column facts table of a section, name -> value."""
    rows = re.findall(r'<td class="text">([^<]*)</td><td class="text wrap">([^<]*)</td>', section)
    return dict(rows)


def _column(section: str, column: int) -> list:
    """The cells of one column of a section's (first) table with a header, as text."""
    body = section[section.index("<tbody>") : section.index("</tbody>")]
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", body)
    return [re.findall(r"<td[^>]*>([^<]*)</td>", row)[column] for row in rows]


#: What each real fit's report must hold: the figures it draws and those its data or
#: sampler cannot give (MAP: no rank probabilities nor convergence plots), the kind of data
#: every check panel shows, and the sections that must say why they are skipped.
MODE_REPORTS = {
    ("bt", "2pl"): {
        "figures": {"forest", "ppc_models", "calibration"},
        "absent": {"wright_map", "icc", "difficulty_discrimination", "ppc_items"},
        "kind": "arena",
        "skipped": {a: panels.items.NO_ITEMS for a in ("wright", "icc", "items")},
    },
    ("static", "1pl"): {
        "figures": {"forest", "wright_map", "ppc_models", "ppc_items", "calibration"},
        "absent": {"icc", "difficulty_discrimination"},
        "kind": "static",
        "skipped": {
            "icc": "Skipped: a Rasch (1pl) fit gives every item the same discrimination",
            "items": "Skipped: a Rasch (1pl) fit has no discrimination parameters.",
        },
    },
}
MAP_ONLY_ABSENT = {"rank_heatmap", "rhat_ess", "rank_plots"}


def test_real_fits_of_other_modes(tmp_path, monkeypatch):
    # the check panels' figures: which replicated statistics and calibrations they drew
    drawn = []

    def spy(name, titles):
        original = getattr(plots, name)

        def recorded(panel_data, *args, **kwargs):
            drawn.extend(re.sub(r" \(\d+\)$", "", t) for t in titles(panel_data))
            return original(panel_data, *args, **kwargs)

        monkeypatch.setattr(plots, name, recorded)

    spy("observed_vs_replicated", lambda ps: [p["title"] for p in ps])
    spy("calibration", list)

    ds = make_dataset(n_models=5, n_static=20, n_arena=8, seed=7)
    for (mode, irt), want in MODE_REPORTS.items():
        drawn.clear()
        config = load_spec("dualeval-2pl").replace(mode=mode, irt=irt)
        result = fit(ds, config, SamplerSettings(sampler="map"))
        out = output.write(result, tmp_path / f"{mode}-{irt}", ci=0.8)
        text = html_of(out)
        md = (out / report.MD_FILE).read_text(encoding="utf-8")
        assert "could not be drawn" not in text
        assert_self_contained(text)
        assert f"(mode {mode}, {irt})" in text
        for anchor, title in report.SECTIONS.items():
            assert f'<h2 id="{anchor}">{title}</h2>' in text and f"## {title}" in md
        # the figures of this mode's data, and none of those it has no data for
        figures = {p.stem for p in (out / report.FIGURES_DIR).glob("*.png")}
        assert want["figures"] <= figures, (mode, figures)
        assert not figures & (want["absent"] | MAP_ONLY_ABSENT), (mode, figures)
        for anchor, note in want["skipped"].items():
            assert note in section_text(text, anchor), anchor
            assert note in md, anchor
        for anchor in {"wright", "icc", "items"} - set(want["skipped"]):
            assert "Skipped" not in section_text(text, anchor), anchor
        assert "MAP fit has a single draw" in section_text(text, "ranks")
        assert "Not applicable: a MAP fit" in section_text(text, "diagnostics")

        # the checks show only the kind of data the mode has
        kind, other = want["kind"], {"arena": "static", "static": "arena"}[want["kind"]]
        assert drawn and all(kind in t.lower() and other not in t.lower() for t in drawn), drawn
        facts = _facts(section_text(text, "ppc"))
        static_out, arena_out = facts["models outside (static / arena)"].split(" / ")
        static_cal, arena_cal = facts["calibration error (static / arena)"].split(" / ")
        if kind == "arena":
            assert static_out == static_cal == facts["static items outside"] == "\u2013"
            assert arena_out.endswith("%") and float(arena_cal) >= 0
            assert float(facts["arena dispersion"]) > 0
        else:
            assert arena_out == arena_cal == facts["arena dispersion"] == "\u2013"
            assert static_out.endswith("%") and float(static_cal) >= 0
            assert facts["static items outside"].endswith("%")
        assert set(_column(section_text(text, "anomalies"), 2)) == {kind}
        audit = section_text(text, "contamination")
        if kind == "arena":  # no static benchmark to audit, and pairs carry no reward
            assert "No static benchmarks or arena rewards to audit" in audit
            assert "<table" not in audit
        else:
            blocks = _column(audit, 1)
            assert blocks and set(blocks) == {"static"}
            assert all(b.startswith("bench/") for b in _column(audit, 2))  # no arena source


def test_many_models_with_long_names(tmp_path, monkeypatch):
    # the panels that label models (item panels do not grow with them)
    only_panels(monkeypatch, "leaderboard", "abilities", "ranks", "wright", "ppc", "diagnostics")
    n = 64
    names = [
        f"org-{k:02d}/an-extremely-long-model-name-with-a-version-suffix-v{k}.{k % 7}-chat"
        for k in range(n)
    ]
    ds = make_dataset(n_models=n, n_static=20, n_arena=6, names=names, seed=8)
    result = synthetic_run(ds, draws=30)
    folder, paths = write_synthetic(tmp_path, result)
    text = html_of(folder)
    board = section_text(text, "leaderboard")
    assert board.count("<tr") == n + 1
    for name in names:
        assert f">{name}<" in board  # the table keeps full names
    forest = next(p for p in paths if p.stem == "forest")
    heat = next(p for p in paths if p.stem == "rank_heatmap")
    _, small_paths = write_synthetic(tmp_path, synthetic_run(make_dataset(seed=8)), "small")
    small_forest = next(p for p in small_paths if p.stem == "forest")
    assert png_size(forest)[1] > 2.5 * png_size(small_forest)[1]  # height scales with rows
    assert png_size(heat)[1] > 1000


def test_plot_labels_are_shortened():
    assert plots.short("a" * 50 + "-v2.1", 11) == "aaaaa\u2026-v2.1"
    assert plots.short("short", 10) == "short"
    table = pd.DataFrame(
        {
            "model": ["y" * 90, "b"],
            "theta_mean": [0.5, -0.5],
            "theta_lo": [np.nan] * 2,
            "theta_hi": [np.nan] * 2,
            "tier": [1, 2],
        }
    )
    fig = plots.forest(table)
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert max(len(t) for t in labels) <= plots.LABEL_CHARS
    assert "no intervals" in fig.axes[0].get_title(loc="left")


def test_scatter_subset_draws_flagged_points_first():
    assert np.array_equal(plots.subset(50, limit=100), np.arange(50))
    first = np.zeros(10_000, bool)
    first[::1000] = True
    rows = plots.subset(10_000, first, limit=100)
    assert len(rows) == 100 and np.all(np.diff(rows) > 0)
    assert set(np.flatnonzero(first)) <= set(rows)
    assert np.array_equal(rows, plots.subset(10_000, first, limit=100))  # seeded


# --------------------------------------------------------------------------- one result


def test_fit_writes_the_run_without_reading_it_back(map_run, tmp_path, monkeypatch):
    """The tables and report of a fit come from the in-memory result, not the run folder."""
    result = dataclasses.replace(map_run[0], ci=None, ppc=None, tables={})
    reads = []
    real_open, real_h5 = builtins.open, h5py.File

    def spy_open(file, mode="r", *args, **kwargs):
        if isinstance(file, str | Path) and not set(mode) & set("wax"):
            reads.append(Path(file))
        return real_open(file, mode, *args, **kwargs)

    def spy_h5(name, mode="r", *args, **kwargs):
        if mode == "r":
            reads.append(Path(name))
        return real_h5(name, mode, *args, **kwargs)

    def no_loading(*args, **kwargs):
        raise AssertionError("the fit's write path loaded the run")

    monkeypatch.setattr(builtins, "open", spy_open)
    monkeypatch.setattr(io, "open", spy_open)  # pathlib's read_text and read_bytes
    monkeypatch.setattr(h5py, "File", spy_h5)
    monkeypatch.setattr(load, "load_run", no_loading)
    monkeypatch.setattr(pd, "read_csv", no_loading)
    out = output.write(result, tmp_path / "run", ci=0.9)
    assert (out / report.HTML_FILE).is_file() and (out / "items.csv").is_file()
    assert [p for p in reads if tmp_path in p.parents] == []
    # the report's tables are the result's tables, computed once
    tables = {"leaderboard", "pairwise", "items", "anomalies", "contamination", "benchmarks"}
    assert set(result.tables) == tables | {"dependence"}
    assert result.ci == 0.9 and result.diagnostics["ppc"] == result.ppc.summary


def test_report_command_path_renders_the_same_report_as_the_fit(map_run, tmp_path):
    """A run read back (load_result) renders byte for byte the report and tables of its fit."""
    result, out = map_run
    copy = tmp_path / "copy" / out.name  # same folder name: the header shows it
    copy.mkdir(parents=True)
    back = load.load_result(out)
    paths = output.rewrite(back, copy)  # at the run's recorded level
    assert back.ci == result.ci == 0.9
    assert [p.name for p in paths[:9]] == [
        "leaderboard.csv", "pairwise.csv", "items.csv", "anomalies.csv", "benchmarks.csv",
        "dependence.csv", "contamination.csv", report.HTML_FILE, report.MD_FILE,
    ]  # fmt: skip
    for name in ("leaderboard.csv", "pairwise.csv", "items.csv", "anomalies.csv",
                 "benchmarks.csv", "dependence.csv", "contamination.csv",
                 report.MD_FILE):  # fmt: skip
        assert (copy / name).read_text() == (out / name).read_text(), name
    assert html_of(copy) == html_of(out)
    for png in (out / report.FIGURES_DIR).iterdir():
        assert (copy / report.FIGURES_DIR / png.name).read_bytes() == png.read_bytes(), png.name


@pytest.mark.parametrize("norm", ["source", "global"])
def test_load_result_reads_the_fitted_data_back(tmp_path, norm):
    ds = make_dataset(seed=9, reward_norm=norm, arena_sources=2)
    assert len(ds.groups) == 3
    result = synthetic_run(ds, draws=4)
    result.diagnostics["data"]["skipped"] = {"duplicate (model, item)": 2}
    out = write_run(result, tmp_path / "run")
    back = load.load_result(out)
    stored = back.dataset
    assert stored.reward_norm == norm and dict(stored.skipped) == {"duplicate (model, item)": 2}
    for field in (
        "models", "items", "item_kind", "item_source", "item_domain", "groups", "item_group",
        "static_model", "static_item", "static_y", "arena_model", "arena_item",
        "arena_reward", "arena_z",
    ):  # fmt: skip
        np.testing.assert_array_equal(getattr(stored, field), getattr(ds, field), field)
        assert not getattr(stored, field).flags.writeable, field
    assert back.config == result.config and back.settings == result.settings
    for field in ("item", "i", "j", "row_i", "row_j", "target", "both_bad"):
        np.testing.assert_array_equal(getattr(back.pairs, field), getattr(result.pairs, field))
    pd.testing.assert_frame_equal(back.parameters, result.parameters)


def test_load_result_uses_the_stored_rewards_and_recorded_spec(tmp_path):
    """The normalised rewards are the ones the model saw, not normalised again."""
    result = synthetic_run(make_dataset(seed=12), draws=4)
    out = write_run(result, tmp_path / "run")
    idata, diagnostics = load.load_run(out)
    idata.observed_data["arena_z"] = idata.observed_data["arena_z"] + 0.5
    stored = load.stored_dataset(idata, diagnostics)
    np.testing.assert_allclose(stored.arena_z, result.dataset.arena_z + 0.5)
    np.testing.assert_array_equal(stored.arena_reward, result.dataset.arena_reward)
    del diagnostics["data"]["reward_norm"]
    with pytest.raises(InputError, match="normalisation"):
        load.stored_dataset(idata, diagnostics)
    del idata.posterior.attrs["model_config"]
    idata.to_netcdf(str(tmp_path / "bare.nc"))
    shutil.copy(tmp_path / "bare.nc", out / "posterior.nc")
    with pytest.raises(InputError, match="does not record which model"):
        load.load_result(out)


# --------------------------------------------------------------------------- panels


def test_panel_registry_gives_sections_figures_and_order(nuts_like):
    assert list(report.SECTIONS) == [p.anchor for p in panels.PANELS]
    assert len(set(report.FIGURES)) == len(report.FIGURES)
    _, folder, paths = nuts_like
    text = html_of(folder)
    positions = [text.index(f'<h2 id="{p.anchor}">{p.title}</h2>') for p in panels.PANELS]
    assert positions == sorted(positions)
    toc = text[text.index('<nav class="toc">') : text.index("</nav>")]
    assert re.findall(r'href="#([^"]+)"', toc) == list(report.SECTIONS)
    assert {p.stem for p in paths if p.suffix == ".png"} <= set(report.FIGURES)


def test_a_panel_added_to_the_registry_is_drawn(nuts_like, tmp_path, monkeypatch):
    result = nuts_like[0]

    def draw(doc, ctx):
        doc.para(f"{len(ctx.models)} models at {ctx.ci:g}")
        doc.figure("extra", plots.forest(ctx.board), "an extra figure")

    first = panels.PANELS[0]
    added = panels.Panel("extra", "Extra panel", draw, ("extra",))
    monkeypatch.setattr(report, "PANELS", (first, added))
    folder, paths = write_synthetic(tmp_path, result)
    text = html_of(folder)
    assert '<a href="#extra">Extra panel</a>' in text
    assert "6 models at 0.9" in section_text(text, "extra")
    assert "extra.png" in {p.name for p in paths}
    # a figure the registry does not declare fails the panel (and only it)
    undeclared = panels.Panel("extra", "Extra panel", draw)
    monkeypatch.setattr(report, "PANELS", (first, undeclared))
    with pytest.warns(ReportWarning, match="not declared"):
        folder, paths = write_synthetic(tmp_path, result, "undeclared")
    assert "could not be drawn" in section_text(html_of(folder), "extra")
    assert "extra.png" not in {p.name for p in paths}


@pytest.mark.parametrize("irt", ["2pl", "3pl", "4pl"])
def test_item_curves_use_the_runs_link(irt):
    result = synthetic_run(make_dataset(n_models=4, n_static=8, n_arena=4, seed=13), irt=irt)
    output.tabulate(result, ci=0.9)
    ctx = ReportContext(result, "run")
    post = result.idata.posterior
    grid = np.linspace(-2, 2, 7)
    draws = ctx.thin(1000)
    k = 3  # a static item
    shift = post["theta"].values.reshape(-1, result.dataset.n_models).mean(axis=1)

    def item(name, default):
        if name not in post:
            return np.full((len(draws), 1), default)
        return post[name].values.reshape(-1, post.sizes["item"])[draws, k : k + 1]

    b = item("b", 0.0) - shift[draws, None]
    eta = item("a", 1.0) * (grid[None, :] - b)
    c, d = item("c", 0.0), item("d", 1.0)
    expected = c + (d - c) * special.expit(eta)
    np.testing.assert_allclose(ctx.success_curve(k, grid, draws), expected, rtol=1e-5, atol=1e-6)
    if irt != "2pl":
        assert expected.min() > 0.1  # the floor is in the curve


# --------------------------------------------------------------------------- failures


def test_a_failing_panel_becomes_a_note_and_a_warning(nuts_like, tmp_path, monkeypatch):
    only_panels(monkeypatch, "wright", "icc")
    result = nuts_like[0]

    def broken(*args, **kwargs):
        raise RuntimeError("no ink")

    monkeypatch.setattr(plots, "wright_map", broken)
    folder = tmp_path / "run"
    folder.mkdir()
    with pytest.warns(ReportWarning, match="wright"):
        report.write_report(result, folder)
    text = html_of(folder)
    assert "could not be drawn (RuntimeError: no ink)" in section_text(text, "wright")
    assert 'id="icc"' in text and "icc.png" in (folder / report.MD_FILE).read_text()


def test_report_failure_keeps_the_run(map_run, tmp_path, monkeypatch):
    result, _ = map_run

    def broken(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(report, "write_report", broken)
    with pytest.warns(ReportWarning, match="bayes-dualeval report"):
        out = output.write(result, tmp_path / "run", ci=0.9)
    assert (out / "posterior.nc").is_file() and (out / "leaderboard.csv").is_file()
    assert not (out / report.HTML_FILE).exists()


# --------------------------------------------------------------------------- CLI


def test_report_command_regenerates_from_the_run_folder(map_run, tmp_path):
    _, out = map_run
    run_dir = tmp_path / "copy"
    shutil.copytree(out, run_dir)
    for name in (report.HTML_FILE, report.MD_FILE, "leaderboard.csv"):
        (run_dir / name).unlink()
    shutil.rmtree(run_dir / report.FIGURES_DIR)
    result = CliRunner().invoke(cli, ["report", str(run_dir), "--ci", "0.8"])
    assert result.exit_code == 0, result.output
    assert "wrote" in result.output and "report.html" in result.output
    assert (run_dir / report.HTML_FILE).is_file()
    assert (run_dir / "figures" / "forest.png").is_file()
    assert (run_dir / "leaderboard.csv").is_file()
    _, diagnostics = load.load_run(run_dir)
    assert diagnostics["ci"] == 0.8
    assert_self_contained(html_of(run_dir))


def test_report_command_on_a_folder_that_is_not_a_run(tmp_path):
    result = CliRunner().invoke(cli, ["report", str(tmp_path)])
    assert result.exit_code != 0
    assert "Error:" in result.output and "not a run folder" in result.output
    assert "Traceback" not in result.output


def test_report_command_help_has_an_example():
    result = CliRunner().invoke(cli, ["report", "--help"])
    assert result.exit_code == 0
    assert "Example:" in result.output and "bayes-dualeval report runs/" in result.output


# --------------------------------------------------------------------------- the browser


def _chromium():
    from importlib import util

    spec = util.spec_from_file_location("check_report", CHECKER)
    module = util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


needs_chromium = pytest.mark.skipif(
    _chromium().find_browser() is None,
    reason="Chromium is not installed (apt-get install chromium)",
)


@needs_chromium
def test_report_loads_in_chromium_without_console_errors(nuts_like, tmp_path):
    _, folder, _ = nuts_like
    shot = tmp_path / "shot.png"
    proc = subprocess.run(
        [
            sys.executable,
            str(CHECKER),
            str(folder / report.HTML_FILE),
            "--screenshot",
            str(shot),
            "--window-size",
            "1400,3000",
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert shot.is_file() and png_size(shot) == (1400, 3000)


@needs_chromium
def test_chromium_check_catches_a_console_error(tmp_path):
    page = tmp_path / "bad.html"
    page.write_text("<!DOCTYPE html><p>x</p><script>throw new Error('boom')</script>")
    proc = subprocess.run(
        [sys.executable, str(CHECKER), str(page)],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 1
    assert "Uncaught" in proc.stderr


def test_flagged_items_are_ordered_by_seriousness_then_evidence():
    import pandas as pd

    from bayes_dualeval.report.panels.flagged import serious_order

    items = pd.DataFrame(
        {
            "item": ["ok", "nosig", "mis_weak", "misfit", "mis_strong", "low"],
            "flags": ["", "no_signal", "miskeyed", "misfit", "miskeyed;misfit",
                      "low_discrimination"],
            "key_q": [0.9, np.nan, 0.15, 0.5, 0.01, 0.6],
            "key_evidence": [-3.0, np.nan, 2.0, 0.1, 6.0, -1.0],
            "ppp": [0.5, np.nan, 0.3, 0.01, 0.02, 0.4],
        }
    )  # fmt: skip
    assert serious_order(items)["item"].tolist() == [
        "mis_strong", "mis_weak", "misfit", "low", "nosig"
    ]  # fmt: skip


def test_item_patterns_draws_one_panel_per_item():
    fig = plots.item_patterns(
        [
            {"title": "q1", "ability": np.array([-1.0, 0.0, 1.0]),
             "outcome": np.array([1.0, 0.0, 0.0]), "grid": np.linspace(-2, 2, 5),
             "fitted": np.full(5, 0.4)},
            {"title": "q2", "ability": np.array([-1.0, 1.0]), "outcome": np.array([0.0, 1.0])},
        ]
    )  # fmt: skip
    assert len(fig.axes) == 2
    assert plots.to_png(fig)[:4] == b"\x89PNG"


def test_ranking_figures_show_the_best_models_of_a_long_board(tmp_path, monkeypatch):
    from bayes_dualeval.report.panels import rankings

    only_panels(monkeypatch, "leaderboard", "abilities", "ranks")
    monkeypatch.setattr(rankings, "FIGURE_MODELS", 12)
    n = 30
    result = synthetic_run(make_dataset(n_models=n, n_static=20, n_arena=6, seed=9), draws=40)
    folder, paths = write_synthetic(tmp_path, result)
    text = html_of(folder)
    assert section_text(text, "leaderboard").count("<tr") == n + 1  # the table keeps all
    # both figures say so, in the caption and in the image's alternative text
    assert text.count(f"shows the 12 best of {n} models by posterior mean") == 4
    assert "The last column pools the ranks below 12." in text
    forest = next(p for p in paths if p.stem == "forest")
    from bayes_dualeval.report.plots.base import row_height

    assert png_size(forest)[1] < 0.75 * row_height(n) * 110  # 12 rows, not 30


def test_rank_probabilities_pool_the_ranks_past_the_models_shown():
    from bayes_dualeval.report.panels.rankings import rank_probabilities_of

    rng = np.random.default_rng(3)
    r = np.argsort(np.argsort(-rng.normal(size=(500, 9)), axis=1), axis=1) + 1
    whole = rank_probabilities_of(r, np.arange(9))
    direct = np.stack([(r == k).mean(axis=0) for k in range(1, 10)], axis=1)
    np.testing.assert_allclose(whole[:, :9], direct)
    assert (whole[:, 9] == 0).all()
    top = rank_probabilities_of(r, np.array([4, 0, 7]))
    np.testing.assert_allclose(top[:, :3], direct[[4, 0, 7], :3])
    np.testing.assert_allclose(top[:, 3], 1 - direct[[4, 0, 7], :3].sum(axis=1))
