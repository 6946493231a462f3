"""The run report: ``report.html`` (one self-contained file) and ``report.md`` with figures.

:func:`write_report` reads what it needs from a run's :class:`arviz.InferenceData` and
diagnostics (loading ``posterior.nc`` and ``diagnostics.json`` when they are not given),
so a report can be rebuilt at any time without refitting (``bayes-dualeval report
RUN_DIR``). The HTML embeds every figure as a base64 PNG and its CSS inline: no scripts,
no network, one file to send around. Every label that comes from the data is escaped.
The Markdown file links the same PNGs, written to ``figures/`` beside it. Every file is
written atomically.

Panels that need posterior intervals (rank probabilities, posterior-predictive intervals,
convergence diagnostics) are skipped with a reason for a MAP fit; panels that need item
parameters are skipped for the Bradley-Terry mode; panels that need discriminations are
skipped for a Rasch (1pl) fit. A panel that fails is replaced by a note and a
:class:`~bayes_dualeval.errors.ReportWarning`, so one broken panel never costs the report.
"""

from __future__ import annotations

import base64
import html
import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from bayes_dualeval import __version__
from bayes_dualeval.data.dataset import Dataset
from bayes_dualeval.errors import InputError, ReportWarning
from bayes_dualeval.posterior.diagnostics import EBFMI_MIN, ESS_MIN, RHAT_MAX, per_parameter
from bayes_dualeval.posterior.idata import arena_levels_identified
from bayes_dualeval.posterior.summaries import draws_of, interval, leaderboard, ranks
from bayes_dualeval.report import plots
from bayes_dualeval.runs import atomic

HTML_FILE = "report.html"
MD_FILE = "report.md"
FIGURES_DIR = "figures"
#: Section anchor -> heading, in the order they appear.
SECTIONS = {
    "leaderboard": "Leaderboard",
    "abilities": "Abilities",
    "ranks": "Rank probabilities",
    "wright": "Wright map",
    "icc": "Item characteristic curves",
    "items": "Difficulty and discrimination",
    "ppc": "Posterior predictive checks",
    "anomalies": "Anomalies",
    "diagnostics": "Diagnostics",
    "run": "Run details",
}
#: Every figure the report can write (stale ones are removed on regeneration).
FIGURES = (
    "forest", "rank_heatmap", "wright_map", "icc", "difficulty_discrimination",
    "ppc_models", "ppc_items", "calibration", "rhat_ess", "rank_plots", "loss_trace",
)  # fmt: skip
#: Rows of the anomalies table shown in the report.
TOP_ANOMALIES = 20
#: Draws used for curves and replicated data (thinned evenly beyond this).
MAX_DRAWS = 1000

CSS = """
*{box-sizing:border-box}
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;
margin:0;color:#1d232b;background:#eef1f4;line-height:1.45}
main{max-width:1280px;margin:0 auto;padding:20px 36px 64px;background:#fff;min-height:100vh}
h1{font-size:1.7em;margin:8px 0 4px}
h2{font-size:1.3em;border-bottom:2px solid #e1e6ec;padding-bottom:4px;margin:2.2em 0 .6em}
p{margin:.5em 0;max-width:60em}
.meta{color:#56606b;font-size:.92em;margin:0}
nav.toc{font-size:.92em;margin:10px 0 4px;padding:8px 0;border-top:1px solid #e1e6ec;
border-bottom:1px solid #e1e6ec}
nav.toc{display:flex;flex-wrap:wrap;gap:4px 18px}
nav.toc a{color:#2b5c8f;text-decoration:none;white-space:nowrap}
.banner{border-radius:6px;padding:10px 16px;margin:14px 0}
.banner strong{display:block;margin-bottom:2px}
.banner ul{margin:4px 0 0 0;padding-left:1.3em}
.banner-error{background:#fdecea;border:2px solid #d9534f;color:#6f1a14}
.banner-warn{background:#fff5dc;border:1px solid #e0b450;color:#5a4510}
.banner-info{background:#e9f1fa;border:1px solid #93b6dc;color:#1d3c5c}
.note{color:#56606b;font-style:italic}
.scroll{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;font-size:.84em;margin:8px 0 4px}
th,td{padding:3px 7px;border-bottom:1px solid #e6e9ed;text-align:right;vertical-align:top;
font-variant-numeric:tabular-nums}
th{background:#f1f4f7;position:sticky;top:0;font-weight:600}
th,td{white-space:nowrap}
th.text,td.text{text-align:left}
td.name{text-align:left;white-space:normal;min-width:12em;max-width:34em;
overflow-wrap:anywhere;font-weight:500}
td.wrap{white-space:normal;text-align:left;min-width:20em}
tr.tier-b td{background:#f5f7fa}
tr.tier-start td{border-top:2px solid #8d9aa8}
td.tie{color:#8a6d00;font-weight:700;text-align:center}
td.bad{color:#b3261e;font-weight:600}
td.good{color:#1e6b37}
figure{margin:14px 0 18px}
img{max-width:100%;height:auto;border:1px solid #edf0f3}
figcaption{font-size:.88em;color:#56606b;max-width:60em}
code{font-size:.92em;background:#f1f4f7;padding:0 3px;border-radius:3px}
""".strip()


# --------------------------------------------------------------------------- the dataset


def dataset_from_idata(idata, *, reward_norm: str | None = None) -> Dataset:
    """Rebuild the fitted :class:`~bayes_dualeval.data.dataset.Dataset` from a run's idata.

    The static labels and raw arena rewards come from ``observed_data`` (with their model
    and item coordinates), item sources and domains from ``constant_data``. Rewards are
    z-normalised again with ``reward_norm``, which reproduces the stored ``arena_z``.

    Parameters
    ----------
    idata : arviz.InferenceData
        As written by :func:`bayes_dualeval.posterior.idata.to_inference_data`.
    reward_norm : {"source", "global"}, optional
        The run's normalisation (``diagnostics["data"]["reward_norm"]``). When None, the
        one that reproduces the stored ``arena_z`` is used (``source`` when both do, as
        with a single arena source).

    Returns
    -------
    Dataset
        Same models, items (in the same order), labels and normalised rewards; the skip
        counts and file list of the original load are not recorded and are empty. Should
        no normalisation reproduce the stored ``arena_z``, the stored values are used.

    Raises
    ------
    InputError
        If the idata lacks ``observed_data`` or ``constant_data``.
    """
    groups = set(idata.groups())
    if not {"observed_data", "constant_data"} <= groups:
        raise InputError("the posterior has no observed_data/constant_data to rebuild data from")
    obs, const = idata.observed_data, idata.constant_data
    meta = pd.DataFrame(
        {
            "source": np.asarray(const["item_source"].values, dtype=str),
            "domain": np.asarray(const["item_domain"].values, dtype=str),
        },
        index=pd.Index(np.asarray(const["item"].values, dtype=str)),
    )

    def table(prefix: str, value: str, column: str) -> pd.DataFrame | None:
        if value not in obs.data_vars:
            return None
        items = np.asarray(obs[f"{prefix}_item"].values, dtype=str)
        return pd.DataFrame(
            {
                "model": np.asarray(obs[f"{prefix}_model"].values, dtype=str),
                "item": items,
                "source": meta["source"].reindex(items).to_numpy(),
                "domain": meta["domain"].reindex(items).to_numpy(),
                column: np.asarray(obs[value].values),
            }
        )

    static = table("static", "static_y", "correct")
    arena = table("arena", "arena_reward", "reward")
    stored_z = np.asarray(obs["arena_z"].values, float) if arena is not None else None
    candidates = [reward_norm] if reward_norm else ["source", "global"]
    for norm in candidates:
        ds = Dataset.from_tables(static, arena, reward_norm=norm)
        if stored_z is None or np.allclose(ds.arena_z, stored_z, rtol=1e-9, atol=1e-9):
            return ds
    # not reproducible (an older run, or rewards edited since): keep the z the model saw
    z = np.array(stored_z, dtype=np.float64)
    z.setflags(write=False)
    object.__setattr__(ds, "arena_z", z)
    return ds


# --------------------------------------------------------------------------- HTML + Markdown


def _md(text) -> str:
    """Text for Markdown: HTML-escaped, with Markdown's special characters escaped."""
    return re.sub(r"([\\`*_\[\]|#~])", r"\\\1", html.escape(str(text), quote=False))


def _num(x, spec: str = ".2f") -> str:
    try:
        if x is None or not np.isfinite(float(x)):
            return "\u2013"
    except (TypeError, ValueError):
        return str(x)
    return format(float(x), spec)


class _Doc:
    """Build the HTML and Markdown reports side by side."""

    def __init__(self):
        self.html: list[str] = []
        self.md: list[str] = []
        self.figures: dict[str, bytes] = {}

    def section(self, anchor: str) -> None:
        title = SECTIONS[anchor]
        self.html.append(f'<h2 id="{anchor}">{html.escape(title)}</h2>')
        self.md.append(f"## {title}\n")

    def para(self, text: str, *, raw_html: str | None = None, cls: str = "") -> None:
        """A paragraph of plain text (escaped); ``raw_html`` overrides the HTML form."""
        attr = f' class="{cls}"' if cls else ""
        self.html.append(f"<p{attr}>{raw_html if raw_html is not None else html.escape(text)}</p>")
        self.md.append(("_" + _md(text) + "_" if cls == "note" else _md(text)) + "\n")

    def note(self, text: str) -> None:
        self.para(text, cls="note")

    def banner(self, kind: str, title: str, lines=()) -> None:
        items = "".join(f"<li>{html.escape(str(t))}</li>" for t in lines)
        self.html.append(
            f'<div class="banner banner-{kind}" role="alert"><strong>{html.escape(title)}'
            f"</strong>{f'<ul>{items}</ul>' if items else ''}</div>"
        )
        icon = {"error": "\u26d4", "warn": "\u26a0\ufe0f", "info": "\u2139\ufe0f"}[kind]
        self.md.append(f"> {icon} **{_md(title)}**")
        self.md.extend(f"> - {_md(t)}" for t in lines)
        self.md.append("")

    def table(
        self,
        frame: pd.DataFrame,
        *,
        text: tuple = (),
        names: tuple = (),
        row_class=None,
        cell_class=None,
        header: bool = True,
    ) -> None:
        """A table of strings; ``text`` columns align left, ``names`` may wrap anywhere."""
        cols = list(frame.columns)

        def cls(c):
            return "name" if c in names else "text" if c in text else ""

        head = "".join(
            f'<th class="{"text" if c in text or c in names else ""}">{html.escape(str(c))}</th>'
            for c in cols
        )
        body = []
        for k, row in enumerate(frame.itertuples(index=False)):
            rc = row_class(k) if row_class else ""
            cells = []
            for c, v in zip(cols, row, strict=True):
                extra = cell_class(k, c) if cell_class else ""
                classes = " ".join(x for x in (cls(c), extra) if x)
                cells.append(f'<td class="{classes}">{html.escape(str(v))}</td>')
            body.append(f'<tr class="{rc}">{"".join(cells)}</tr>')
        thead = f"<thead><tr>{head}</tr></thead>" if header else ""
        self.html.append(
            f'<div class="scroll"><table>{thead}<tbody>{"".join(body)}</tbody></table></div>'
        )
        self.md.append("| " + " | ".join(_md(c) for c in cols) + " |")
        self.md.append(
            "|" + "|".join(":--" if c in text or c in names else "--:" for c in cols) + "|"
        )
        for row in frame.itertuples(index=False):
            self.md.append("| " + " | ".join(_md(v) for v in row) + " |")
        self.md.append("")

    def figure(self, name: str, fig, caption: str) -> None:
        png = plots.to_png(fig)
        self.figures[name] = png
        data = base64.b64encode(png).decode("ascii")
        self.html.append(
            f'<figure><img src="data:image/png;base64,{data}" alt="{html.escape(caption)}">'
            f"<figcaption>{html.escape(caption)}</figcaption></figure>"
        )
        self.md.append(f"![{_md(caption)}]({FIGURES_DIR}/{name}.png)\n")
        self.md.append(f"_{_md(caption)}_\n")


# --------------------------------------------------------------------------- context


class _Run:
    """What the panels share: draws, tables and facts about the fit."""

    def __init__(
        self,
        idata,
        diagnostics: dict,
        dataset: Dataset,
        ci: float,
        pairs=None,
        ppc=None,
        run_dir: Path | None = None,
        items: pd.DataFrame | None = None,
    ):
        self.run_dir = run_dir
        if ppc is not None:
            self._ppc = ppc
        self._item_table = items
        self.idata = idata
        self.diagnostics = diagnostics
        self.dataset = dataset
        self.ci = ci
        self.pairs = pairs
        post = idata.posterior
        self.sampler = str(diagnostics.get("sampler", {}).get("sampler", "nuts"))
        self.config = diagnostics.get("config", {})
        self.n_chain, self.n_draw = int(post.sizes["chain"]), int(post.sizes["draw"])
        self.point = self.n_chain * self.n_draw < 2
        self.models = np.asarray(post["model"].values, dtype=str)
        self.board = leaderboard(idata, dataset, ci=ci)
        self.has_items = "b" in post.data_vars
        self.has_a = "a" in post.data_vars
        self.theta_c = draws_of(idata, "theta_centred")
        self.items = self._items() if self.has_items else None

    def _items(self) -> pd.DataFrame:
        """Item summaries on the centred scale (``b - mean(theta)`` per draw).

        Taken from the run's item table (the same summaries) when there is one, so that
        wide runs are not summarised twice; computed from the draws otherwise.
        """
        post = self.idata.posterior
        labels = np.asarray(post["item"].values, dtype=str)
        kind = np.asarray(post["item_kind"].values, dtype=str)
        source = np.asarray(post["item_source"].values, dtype=str)
        out = pd.DataFrame(
            {
                "item": labels,
                "kind": kind,
                "source": source,
                "group": np.char.add(np.char.add(kind, ":"), source),
            }
        )
        columns = ["b_mean", "b_lo", "b_hi"] + (["a_mean", "a_lo", "a_hi"] if self.has_a else [])
        out["identified"] = (kind != "arena") | arena_levels_identified(self.idata)
        try:
            table = self.item_table()
        except Exception:  # noqa: BLE001 - fall back to the draws below
            table = None
        if table is not None and table["item"].tolist() == labels.tolist():
            for name in columns:
                out[name] = table[name].to_numpy(float)
            return out
        b = draws_of(self.idata, "b") - self.theta_shift()[:, None]
        out["b_mean"] = b.mean(axis=0)
        out["b_lo"], out["b_hi"] = interval(b, self.ci)
        if self.has_a:
            a = draws_of(self.idata, "a")
            out["a_mean"] = a.mean(axis=0)
            out["a_lo"], out["a_hi"] = interval(a, self.ci)
        return out

    def theta_shift(self) -> np.ndarray:
        """Mean ability of each pooled draw (item difficulties are centred by it)."""
        if not hasattr(self, "_shift"):
            self._shift = draws_of(self.idata, "theta").mean(axis=1)
        return self._shift

    def item_draws(self, k: int, idx: np.ndarray) -> tuple:
        """Draws ``idx`` of item ``k``'s centred difficulty and discrimination (1 under 1pl)."""
        b = draws_of(self.idata, "b")[idx, k] - self.theta_shift()[idx]
        a = draws_of(self.idata, "a")[idx, k] if self.has_a else np.ones_like(b)
        return b, a

    def item_table(self) -> pd.DataFrame | None:
        """The run's item table: as given, read from ``items.csv``, or computed.

        None when this installation has no item checks.
        """
        if self._item_table is None:
            table = _read_items(self)
            if table is None:
                checks = _checks_module()
                if checks is None or not hasattr(checks, "item_table"):
                    return None
                table = checks.item_table(
                    self.idata, self.dataset, ci=self.ci, **self.check_options()
                )
            self._item_table = table
        return self._item_table

    def check_options(self) -> dict:
        """Arguments of the checks: the run's pairs (or distillation quantiles) and seed."""
        out = {"seed": int(self.diagnostics.get("sampler", {}).get("seed", 0))}
        if self.pairs is not None:
            out["pairs"] = self.pairs
            return out
        for key in ("bb_ratio", "tie_ratio"):
            if self.config.get(key) is not None:
                out[key] = float(self.config[key])
        return out

    def ppc(self):
        """The posterior-predictive checks (computed once), or None without the module."""
        if not hasattr(self, "_ppc"):
            checks = _checks_module()
            self._ppc = None
            if checks is not None and hasattr(checks, "posterior_predictive"):
                try:
                    self._ppc = checks.posterior_predictive(
                        self.idata, self.dataset, ci=self.ci, **self.check_options()
                    )
                except Exception as exc:  # noqa: BLE001 - re-raised by every panel that asks
                    self._ppc = exc
        if isinstance(self._ppc, Exception):
            raise self._ppc
        return self._ppc

    def thin(self, n: int) -> np.ndarray:
        """Indices of at most ``n`` evenly spaced pooled draws."""
        total = self.n_chain * self.n_draw
        return np.unique(np.linspace(0, total - 1, min(n, total)).astype(int))


# --------------------------------------------------------------------------- panels


def _header(doc: _Doc, run: _Run, run_dir: Path) -> None:
    d = run.diagnostics
    data = d.get("data", {})
    cfg = run.config
    conv = d.get("convergence", {})
    doc.html.append("<header><h1>Bayesian DualEval report</h1>")
    doc.md.append("# Bayesian DualEval report\n")
    facts = [
        f"run {run_dir.name}",
        f"created {d.get('created', '?')}",
        f"model {cfg.get('name', '?')} (mode {cfg.get('mode', '?')}, {cfg.get('irt', '?')})",
        f"sampler {run.sampler}"
        + (f" ({run.n_chain} chains x {run.n_draw} draws)" if run.sampler == "nuts" else ""),
        f"{len(run.models)} models, {run.dataset.n_items} items",
        "point estimates" if run.point else f"intervals at {run.ci:.0%}",
    ]
    line = " \u00b7 ".join(facts)
    doc.html.append(f'<p class="meta">{html.escape(line)}</p>')
    doc.md.append(_md(line) + "\n")
    links = "".join(f'<a href="#{a}">{html.escape(t)}</a>' for a, t in SECTIONS.items())
    doc.html.append(f'<nav class="toc">{links}</nav></header>')
    if conv.get("converged") is False:
        doc.banner(
            "error",
            "Convergence failed: the posterior summaries below may be wrong.",
            list(conv.get("problems", [])) or ["the convergence checks failed"],
        )
    if run.sampler == "map" or run.point:
        doc.banner(
            "info",
            "MAP point estimate: one value per parameter, no posterior uncertainty.",
            [
                "intervals, rank ranges, tiers, rank probabilities, posterior-predictive "
                "intervals and convergence diagnostics need posterior draws and are skipped",
                "refit with --sampler nuts for the full posterior",
            ],
        )
    elif run.sampler == "svi":
        lines = [
            "intervals come from a variational approximation and are often too narrow",
            "sampling diagnostics (R-hat, ESS, divergences) are unavailable for SVI",
        ]
        if d.get("sampler_info", {}).get("converged") is False:
            lines.insert(
                0,
                "the optimisation did not settle within its step limit "
                "(raise --svi-steps or use --sampler nuts)",
            )
        doc.banner("warn", "SVI: approximate posterior.", lines)
    if data.get("skipped"):
        detail = ", ".join(f"{n} {why}" for why, n in data["skipped"].items())
        doc.banner("warn", "Rows were skipped while loading the data.", [detail])


def _leaderboard(doc: _Doc, run: _Run) -> None:
    doc.section("leaderboard")
    t = run.board
    point = run.point
    pct = f"{run.ci:.0%}"
    rows = {
        "rank": [f"{r}" for r in t["rank"]],
        "": [
            "=" if k and t["tier"].iloc[k] == t["tier"].iloc[k - 1] else "" for k in range(len(t))
        ],
        "model": list(t["model"]),
        "\u03b8": [_num(x) for x in t["theta_mean"]],
    }
    if not point:
        rows[f"{pct} interval"] = [
            f"[{_num(lo)}, {_num(hi)}]"
            for lo, hi in zip(t["theta_lo"], t["theta_hi"], strict=True)
        ]
        rows["rank range"] = [
            _rank_range(lo, hi) for lo, hi in zip(t["rank_lo"], t["rank_hi"], strict=True)
        ]
        rows["P(top 1)"] = [_num(x) for x in t["p_top1"]]
        rows["P(> next)"] = [_num(x) for x in t["p_beats_next"]]
        rows["tier"] = [str(x) for x in t["tier"]]
    rows["static acc."] = [_num(x, ".3f") for x in t["static_accuracy"]]
    rows["mean reward z"] = [_num(x) for x in t["mean_reward_z"]]
    rows["n static"] = [str(int(x)) for x in t["n_static"]]
    rows["n arena"] = [str(int(x)) for x in t["n_arena"]]
    if point:
        del rows[""]  # no tiers without intervals
    frame = pd.DataFrame(rows)
    tiers = t["tier"].to_numpy()
    order = {tier: k for k, tier in enumerate(pd.unique(tiers))}

    def row_class(k):
        if point:
            return ""
        cls = "tier-b" if order[tiers[k]] % 2 else "tier-a"
        if k and tiers[k] != tiers[k - 1]:
            cls += " tier-start"
        return cls

    def cell_class(k, col):
        return "tie" if col == "" and frame[""].iloc[k] else ""

    if point:
        doc.para(
            "Models ordered by their point estimate of ability \u03b8 (centred: the mean over "
            "models is 0). Observed static accuracy and mean normalised arena reward are "
            "shown beside it."
        )
    else:
        doc.para(
            f"Models ordered by posterior mean ability \u03b8 (centred: the mean over models "
            f"is 0), with the {pct} equal-tailed interval and the {pct} interval of the rank. "
            f"A tier groups adjacent models that cannot be told apart: '=' marks a model whose "
            f"neighbour above beats it with probability below {run.ci:g} (P(> next) of the "
            "row above). Rows of alternate tiers are shaded and a rule marks each new tier."
        )
    doc.table(frame, text=("",), names=("model",), row_class=row_class, cell_class=cell_class)


def _rank_range(lo: float, hi: float) -> str:
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return "\u2013"
    return f"{int(lo)}" if int(lo) == int(hi) else f"{int(lo)}\u2013{int(hi)}"


def _abilities(doc: _Doc, run: _Run) -> None:
    doc.section("abilities")
    fig = plots.forest(run.board, ci=None if run.point else run.ci)
    if run.point:
        caption = "Ability point estimates (MAP), best at the top."
    else:
        caption = (
            f"Posterior mean ability (dot) and {run.ci:.0%} interval (line) of every model, "
            "best at the top; shaded bands group models of the same tier."
        )
    doc.figure("forest", fig, caption)


def _ranks(doc: _Doc, run: _Run) -> None:
    doc.section("ranks")
    if run.point:
        doc.note("Skipped: a MAP fit has a single draw, so every rank probability is 0 or 1.")
        return
    r = ranks(run.theta_c)
    m = r.shape[1]
    probs = np.stack([(r == k).mean(axis=0) for k in range(1, m + 1)], axis=1)
    order = pd.Index(run.models).get_indexer(run.board["model"])
    frame = pd.DataFrame(probs[order], index=run.board["model"], columns=np.arange(1, m + 1))
    doc.figure(
        "rank_heatmap",
        plots.rank_heatmap(frame),
        "Posterior probability that each model (row, best first) holds each rank (column). "
        "A sharp diagonal means a settled order; a smeared block marks models whose order "
        "the data cannot fix.",
    )


def _wright(doc: _Doc, run: _Run) -> None:
    doc.section("wright")
    if not run.has_items:
        doc.note("Skipped: the Bradley-Terry mode (bt) has no item parameters.")
        return
    models = run.board[["model", "theta_mean", "theta_lo", "theta_hi"]]
    items = run.items
    left_out = ""
    if "identified" in items and not items["identified"].all():
        n_out = int((~items["identified"]).sum())
        items = items[items["identified"]]
        left_out = (
            f" {n_out} arena prompts are left out: this specification has no arena level "
            "term, so their difficulties are not identified (items.csv marks them)."
        )
    if items.empty:
        doc.note("Skipped: no item has an identified difficulty." + left_out)
        return
    fig = plots.wright_map(models, items, ci=None if run.point else run.ci)
    doc.figure(
        "wright_map",
        fig,
        "Model abilities (top) and the distribution of item difficulties b per item group "
        "(below) on the same centred latent scale. A model at \u03b8 = b succeeds on that "
        "item with probability 0.5; the shaded band spans the models' abilities. Items far "
        "outside the band are too easy or too hard to separate these models." + left_out,
    )


def _curve_band(run: _Run, k: int, grid: np.ndarray):
    b, a = run.item_draws(k, run.thin(MAX_DRAWS))
    p = 0.5 * (1.0 + np.tanh(0.5 * a[:, None] * (grid[None, :] - b[:, None])))  # stable sigmoid
    lo, hi = interval(p, run.ci)
    return p.mean(axis=0), lo, hi


def _spread(order: np.ndarray, b: np.ndarray, n: int = 4, gap: float = 0.35) -> list:
    """The first ``n`` items of ``order`` whose difficulties differ by ``gap`` or more.

    Near-identical items (often weakly identified prompts) would draw one curve on top of
    another; skipping them shows different parts of the scale instead.
    """
    chosen: list = []
    for k in order:
        if all(abs(b[k] - b[c]) >= gap for c in chosen):
            chosen.append(k)
            if len(chosen) == n:
                break
    return chosen


def _icc(doc: _Doc, run: _Run) -> None:
    doc.section("icc")
    if not run.has_items:
        doc.note("Skipped: the Bradley-Terry mode (bt) has no item parameters.")
        return
    if not run.has_a:
        doc.note(
            "Skipped: a Rasch (1pl) fit gives every item the same discrimination a = 1, so "
            "all curves have one shape and differ only in location (see the Wright map)."
        )
        return
    items = run.items
    order = np.argsort(-items["a_mean"].to_numpy(), kind="stable")
    b = items["b_mean"].to_numpy(float)
    theta = run.board["theta_mean"].to_numpy(float)
    lo, hi = np.nanmin(theta) - 2.5, np.nanmax(theta) + 2.5
    grid = np.linspace(lo, hi, 121)
    panels = {}
    for title, chosen in (
        ("Most discriminating items", _spread(order, b)),
        ("Least discriminating items", _spread(order[::-1], b)),
    ):
        curves = []
        for k in chosen:
            row = items.iloc[k]
            mean, c_lo, c_hi = _curve_band(run, k, grid)
            curves.append(
                {
                    "label": f"{plots.short(row['item'], 36)} ({row['kind']}; "
                    f"a={row['a_mean']:.2f}, b={row['b_mean']:.2f})",
                    "mean": mean,
                    "lo": None if run.point else c_lo,
                    "hi": None if run.point else c_hi,
                }
            )
        panels[title] = curves
    doc.figure(
        "icc",
        plots.item_curves(grid, panels, abilities=theta, ci=None if run.point else run.ci),
        "Probability of success against ability for the items with the largest and smallest "
        "posterior mean discrimination a (items with nearly the same difficulty as one "
        "already shown are skipped). Steep curves separate models near their difficulty b; "
        "flat curves carry little information about anyone.",
    )


def _items_panel(doc: _Doc, run: _Run) -> None:
    doc.section("items")
    if not run.has_items:
        doc.note("Skipped: the Bradley-Terry mode (bt) has no item parameters.")
        return
    if not run.has_a:
        doc.note("Skipped: a Rasch (1pl) fit has no discrimination parameters.")
    else:
        _scatter(doc, run)
    _flagged_items(doc, run)


def _scatter(doc: _Doc, run: _Run) -> None:
    doc.figure(
        "difficulty_discrimination",
        plots.difficulty_discrimination(run.items),
        "Posterior mean difficulty b against discrimination a of every item, one "
        "panel per item group. The dotted line is a = 1. Useful items have a well above "
        "zero and b within the models' range.",
    )


def _checks_module():
    try:
        from bayes_dualeval.checks import ppc as checks
    except ImportError:
        return None
    return checks


def _ppc(doc: _Doc, run: _Run) -> None:
    doc.section("ppc")
    ppc = run.ppc()
    if ppc is None:
        doc.note("Unavailable: this installation has no posterior-predictive checks.")
        return
    pct = f"{run.ci:.0%}"
    if run.point:
        doc.note(
            "MAP fit: data are replicated at the point estimate (a plug-in check), so the "
            "intervals show sampling noise only and are narrower than a full posterior's."
        )
    doc.para(
        f"Data sets replicated from the fitted model are compared with the observed data. "
        f"Each point is a model or an item; its line is the {pct} interval of the replicated "
        "statistic. Points off the dashed diagonal, and red points outside their interval, "
        "are what the model fails to reproduce."
    )
    sm = ppc.summary
    facts = {
        "models outside (static / arena)": (
            f"{_pct(sm.get('share_models_outside_static'))} / "
            f"{_pct(sm.get('share_models_outside_arena'))}"
        ),
        "static items outside": _pct(sm.get("share_items_outside")),
        "calibration error (static / arena)": (
            f"{_num(sm.get('calibration_error_static'), '.3f')} / "
            f"{_num(sm.get('calibration_error_arena'), '.3f')}"
        ),
        "arena dispersion": _num(sm.get("arena_dispersion"), ".3f"),
        "replicated data sets": f"{sm.get('replicates')} from {sm.get('draws')} draws",
    }
    _kv_table(doc, facts)
    m = ppc.models
    panels = []
    if (m["n_static"] > 0).any():
        panels.append(
            {
                "table": m,
                "observed": "static_observed",
                "mean": "static_rep_mean",
                "lo": "static_rep_lo",
                "hi": "static_rep_hi",
                "label": "model",
                "title": "Static accuracy per model",
                "axis": "accuracy",
            }
        )
    if (m["n_arena"] > 0).any():
        stat = sm.get("arena_statistic")
        name = "mean normalised reward" if stat == "mean_reward_z" else "arena win share"
        panels.append(
            {
                "table": m,
                "observed": "arena_observed",
                "mean": "arena_rep_mean",
                "lo": "arena_rep_lo",
                "hi": "arena_rep_hi",
                "label": "model",
                "title": f"{name[0].upper()}{name[1:]} per model",
                "axis": name,
            }
        )
    if panels:
        doc.figure(
            "ppc_models",
            plots.observed_vs_replicated(panels),
            "Per model: observed statistic (x) against the replicated mean (y) and its "
            f"{pct} interval. The arena win share counts a model's soft wins over its "
            "decisive pairs.",
        )
    if len(ppc.items):
        doc.figure(
            "ppc_items",
            plots.observed_vs_replicated(
                [
                    {
                        "table": ppc.items,
                        "observed": "observed",
                        "mean": "rep_mean",
                        "lo": "rep_lo",
                        "hi": "rep_hi",
                        "label": "item",
                        "title": "Static accuracy per item",
                        "axis": "share of models correct",
                    }
                ]
            ),
            "Per static item: the share of models that answered correctly, observed (x) "
            f"against replicated (y, with {pct} interval).",
        )
    cal = {}
    for title, table, xlabel, ylabel in (
        (
            "Static labels",
            ppc.calibration_static,
            "predicted P(correct)",
            "observed share correct",
        ),
        (
            "Arena pairs",
            ppc.calibration_arena,
            "predicted P(first model wins)",
            "mean soft target",
        ),
    ):
        t = table[table["n"] > 0]
        if len(t):
            cal[f"{title} ({int(t['n'].sum())})"] = {
                "table": t,
                "predicted": "mean_predicted",
                "observed": "observed_frequency",
                "n": "n",
                "xlabel": xlabel,
                "ylabel": ylabel,
            }
    if cal:
        doc.figure(
            "calibration",
            plots.calibration(cal),
            "Calibration: cells (static) or decisive pairs (arena) binned by predicted "
            "probability; each point is a bin's mean prediction against what was observed, "
            "sized by the number in the bin. A calibrated model follows the diagonal; an "
            "S-shape around it means predictions too timid, a flattened curve too confident.",
        )


def _pct(x) -> str:
    return "\u2013" if x is None else f"{100 * float(x):.0f}%"


def _anomalies(doc: _Doc, run: _Run) -> None:
    doc.section("anomalies")
    ppc = run.ppc()
    if ppc is None:
        doc.note("Unavailable: this installation has no anomaly checks.")
        return
    cells = ppc.anomalies
    if not len(cells):
        doc.note("No cells to check.")
        return
    from bayes_dualeval.checks.ppc import FLAG_Q

    flagged = int((cells["q_value"] < FLAG_Q).sum())
    top = cells.head(TOP_ANOMALIES)
    doc.para(
        f"The {len(top)} most surprising of {len(cells)} model-item cells (smallest "
        "posterior predictive tail probability first). Static: observed label against "
        "the predicted probability of success; arena: the model's soft wins on the prompt "
        "against the predicted wins. residual = (observed \u2212 expected) / predictive sd; "
        f"q is the Benjamini-Hochberg adjusted p-value. {flagged} cell(s) have "
        f"q < {FLAG_Q:g}"
        + (
            ": only these are more surprising than chance among this many cells."
            if flagged
            else "; the rows below are within what chance produces among this many cells."
        )
    )
    frame = pd.DataFrame(
        {
            "model": top["model"],
            "item": top["item"],
            "kind": top["kind"],
            "observed": [_num(x, ".3g") for x in top["observed"]],
            "expected": [_num(x, ".3g") for x in top["expected"]],
            "residual": [_num(x, "+.2f") for x in top["residual"]],
            "ppp": [_num(x, ".2g") for x in top["ppp"]],
            "q": [_num(x, ".2g") for x in top["q_value"]],
        }
    )
    q = top["q_value"].to_numpy(float)

    def cell_class(k, col):
        return "bad" if col == "q" and q[k] < FLAG_Q else ""

    doc.table(frame, text=("kind",), names=("model", "item"), cell_class=cell_class)


def _read_items(run: _Run) -> pd.DataFrame | None:
    """The run's ``items.csv`` when it matches this report's level and items, else None."""
    path = None if run.run_dir is None else run.run_dir / "items.csv"
    if path is None or not path.is_file():
        return None
    try:
        items = pd.read_csv(
            path, keep_default_na=False, na_values=[""], dtype={"item": str, "flags": str}
        )
    except (OSError, ValueError):
        return None
    level = items["ci"].to_numpy(float) if "ci" in items else np.array([np.nan])
    same_level = np.all(np.isnan(level)) if run.point else np.allclose(level, run.ci)
    if not same_level or items["item"].tolist() != run.dataset.items.tolist():
        return None
    items["flags"] = items["flags"].fillna("")
    return items


def _flagged_items(doc: _Doc, run: _Run) -> None:
    items = run.item_table()
    if items is None:
        return
    flags = items["flags"].fillna("").astype(str)
    names = flags[flags != ""].str.split(";").explode()
    counts = names[names != ""].value_counts().to_dict()
    if not counts:
        doc.para(f"No item is flagged (of {len(items)}).")
        return
    doc.para(
        f"Flagged items (of {len(items)}): "
        + ", ".join(f"{n} {flag.replace('_', ' ')}" for flag, n in sorted(counts.items()))
        + ". No signal: every model scored the same; low discrimination: the upper "
        "interval bound of a is below 0.5; misfit: item-fit ppp below 0.05 or above 0.95. "
        "The 15 with the most extreme ppp:"
    )
    ppp = items["ppp"].to_numpy(float)
    tail = pd.Series(np.minimum(ppp, 1.0 - ppp), index=items.index)
    shown = items.loc[tail[flags != ""].sort_values(na_position="last").index].head(15)
    frame = pd.DataFrame(
        {
            "item": shown["item"],
            "kind": shown["kind"],
            "b": [_num(x) for x in shown["b_mean"]],
            "a": [_num(x) for x in shown["a_mean"]],
            "observed": [_num(x, ".3g") for x in shown["observed"]],
            "ppp": [_num(x, ".2g") for x in shown["ppp"]],
            "flags": [x.replace(";", ", ") for x in shown["flags"].astype(str)],
        }
    )
    doc.table(frame, text=("kind", "flags"), names=("item",))


def _diagnostics(doc: _Doc, run: _Run) -> None:
    doc.section("diagnostics")
    d = run.diagnostics
    info = d.get("sampler_info", {})
    if run.sampler == "map" or run.point:
        doc.note(
            "Not applicable: a MAP fit is an optimisation, not a sample, so R-hat, effective "
            "sample sizes, divergences and rank plots do not exist."
        )
        if info:
            _kv_table(doc, {k: v for k, v in info.items() if not isinstance(v, (list, dict))})
        return
    if run.sampler == "svi":
        doc.note(
            "Unavailable: SVI fits an approximation by optimisation, so the sampling "
            "diagnostics (R-hat, ESS, divergences, rank plots) do not apply. Whether the "
            "optimisation settled is shown below; compare with a NUTS fit to check the "
            "intervals."
        )
        _kv_table(doc, {k: v for k, v in info.items() if not isinstance(v, (list, dict))})
        if info.get("loss_trace"):
            doc.figure(
                "loss_trace",
                plots.loss_trace(info["loss_trace"]),
                "SVI loss (negative ELBO) against optimisation step.",
            )
        return
    conv = d.get("convergence", {})
    settings = d.get("sampler", {})
    stats = run.idata.sample_stats if "sample_stats" in run.idata.groups() else None
    facts = {
        "verdict": {True: "converged", False: "NOT converged", None: "not checked"}[
            conv.get("converged")
        ],
        "max R-hat": f"{_num(conv.get('max_rhat'), '.4f')} (limit {RHAT_MAX})",
        "min bulk ESS": f"{_num(conv.get('min_ess_bulk'), '.0f')} (minimum {ESS_MIN})",
        "min tail ESS": f"{_num(conv.get('min_ess_tail'), '.0f')} (minimum {ESS_MIN})",
        "parameters checked": str(conv.get("n_parameters")),
        "divergent transitions": str(conv.get("divergences")),
        "lowest E-BFMI": f"{_num(conv.get('ebfmi_min'), '.2f')} (minimum {EBFMI_MIN})",
        "share at max tree depth": _pct(conv.get("treedepth_hit_share")),
        "chains x draws": f"{run.n_chain} x {run.n_draw} (warm-up {settings.get('warmup', '?')})",
        "target acceptance": str(settings.get("target_accept", "?")),
    }
    if stats is not None:
        if "diverging" in stats:
            per_chain = np.asarray(stats["diverging"].values).sum(axis=1)
            facts["divergences per chain"] = ", ".join(str(int(x)) for x in per_chain)
        if "acceptance_rate" in stats:
            facts["mean acceptance"] = _num(np.asarray(stats["acceptance_rate"]).mean(), ".3f")
        if "step_size" in stats:
            facts["step size (per chain)"] = ", ".join(
                _num(x, ".3g") for x in np.asarray(stats["step_size"].values)[:, -1]
            )
    _kv_table(doc, facts, bad=conv.get("converged") is False and "verdict")
    if conv.get("worst"):
        doc.para("Parameters that fail a check, worst first:")
        worst = pd.DataFrame(conv["worst"])
        frame = pd.DataFrame(
            {
                "parameter": worst["parameter"],
                "R-hat": [_num(x, ".4f") for x in worst.get("rhat", [])],
                "bulk ESS": [_num(x, ".0f") for x in worst.get("ess_bulk", [])],
            }
        )
        doc.table(frame, names=("parameter",))
    per = per_parameter(run.idata)
    doc.figure(
        "rhat_ess",
        plots.rhat_ess(per, rhat_max=RHAT_MAX, ess_min=ESS_MIN),
        f"R-hat (left) and bulk and tail effective sample size (right) of all {len(per)} "
        f"checked parameters. Every R-hat should be at most {RHAT_MAX} and every ESS at "
        f"least {ESS_MIN}.",
    )
    theta = np.asarray(run.idata.posterior["theta"].values)
    keys = [f"theta[{m}]" for m in run.models]
    score = per["rhat"].reindex(keys).to_numpy(float)
    if not np.isfinite(score).any():
        score = -per["ess_bulk"].reindex(keys).to_numpy(float)
    score = np.where(np.isfinite(score), score, -np.inf)
    chosen = np.argsort(-score, kind="stable")[:6]
    draws = {f"\u03b8 {plots.short(run.models[k], 30)}": theta[:, :, k] for k in chosen}
    doc.figure(
        "rank_plots",
        plots.rank_plots(draws),
        "Rank plots of the abilities with the worst R-hat: each chain's histogram of the "
        "ranks of its draws among all draws. Mixed chains give flat histograms near the "
        "dashed line; a chain stuck high or low leans to one side.",
    )


def _kv_table(doc: _Doc, facts: dict, bad=None) -> None:
    frame = pd.DataFrame({"": list(facts), " ": [str(v) for v in facts.values()]})

    def cell_class(k, col):
        if col != " ":
            return ""
        return "wrap bad" if bad and frame[""].iloc[k] == bad else "wrap"

    doc.table(frame, text=("", " "), cell_class=cell_class, header=False)


def _run_details(doc: _Doc, run: _Run) -> None:
    doc.section("run")
    d = run.diagnostics
    cfg = {k: v for k, v in run.config.items() if k != "description"}
    data = d.get("data", {})
    facts = {
        "specification": f"{cfg.pop('name', '?')}: {run.config.get('description', '')}",
        "options": ", ".join(
            f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in cfg.items()
        ),
        "data": (
            f"{data.get('models', '?')} models, {data.get('static_items', 0)} static "
            f"items ({data.get('static_labels', 0)} labels), {data.get('arena_items', 0)}"
            f" arena prompts ({data.get('arena_rewards', 0)} rewards), rewards "
            f"normalised per {data.get('reward_norm', '?')}"
        ),
    }
    if d.get("pairs"):
        p = d["pairs"]
        facts["arena pairs"] = (
            f"{p.get('pairs_total')} in all, {p.get('pairs_decisive')} "
            f"decisive, {p.get('pairs_both_bad')} both-bad, "
            f"{p.get('pairs_tie')} ties"
        )
    if d.get("timings"):
        facts["timings (s)"] = ", ".join(f"{k} {v}" for k, v in d["timings"].items())
    if d.get("versions"):
        v = d["versions"]
        facts["versions"] = ", ".join(
            f"{k} {v[k]}"
            for k in ("bayes_dualeval", "python", "jax", "numpyro", "arviz")
            if k in v
        )
    facts["report"] = f"bayes_dualeval {__version__}"
    _kv_table(doc, facts)


PANELS = (
    _leaderboard, _abilities, _ranks, _wright, _icc, _items_panel, _ppc, _anomalies,
    _diagnostics, _run_details,
)  # fmt: skip


# --------------------------------------------------------------------------- writing


def _page(doc: _Doc, title: str) -> str:
    body = "\n".join(doc.html)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title)}</title><style>{CSS}</style></head>\n"
        f"<body><main>\n{body}\n</main></body></html>\n"
    )


def build(
    run_dir,
    idata,
    diagnostics: dict,
    dataset: Dataset,
    *,
    ci: float,
    pairs=None,
    ppc=None,
    items: pd.DataFrame | None = None,
) -> _Doc:
    """Build the report in memory (HTML parts, Markdown parts and PNG figures).

    Parameters
    ----------
    run_dir : str or Path
        The run folder (its name appears in the header).
    idata : arviz.InferenceData
    diagnostics : dict
    dataset : Dataset
    ci : float
        Interval level.
    pairs : Pairs, optional
        The distilled arena pairs, passed to the posterior-predictive checks.
    ppc : PPC, optional
        Posterior-predictive checks already computed at level ``ci``.
    items : pandas.DataFrame, optional
        The run's item table at level ``ci`` (``items.csv``); read from the run folder,
        or computed, when not given.

    Returns
    -------
    _Doc
        With ``html`` and ``md`` lists of parts and ``figures`` (name to PNG bytes).
    """
    run = _Run(idata, diagnostics, dataset, ci, pairs, ppc, Path(run_dir), items)
    doc = _Doc()
    _header(doc, run, Path(run_dir))
    for panel in PANELS:
        mark = len(doc.html), len(doc.md), set(doc.figures)
        try:
            panel(doc, run)
        except Exception as exc:  # noqa: BLE001 - one broken panel must not cost the report
            name = panel.__name__.strip("_")
            del doc.html[mark[0] :], doc.md[mark[1] :]
            for key in set(doc.figures) - mark[2]:
                del doc.figures[key]
            anchor = _anchor_of(panel)
            doc.section(anchor)
            doc.note(f"This panel could not be drawn ({type(exc).__name__}: {exc}).")
            warnings.warn(
                f"report panel {name!r} failed: {type(exc).__name__}: {exc}",
                ReportWarning,
                stacklevel=2,
            )
    return doc


def _anchor_of(panel) -> str:
    return {
        _leaderboard: "leaderboard",
        _abilities: "abilities",
        _ranks: "ranks",
        _wright: "wright",
        _icc: "icc",
        _items_panel: "items",
        _ppc: "ppc",
        _anomalies: "anomalies",
        _diagnostics: "diagnostics",
        _run_details: "run",
    }[panel]


def write_report(
    run_dir,
    idata=None,
    diagnostics: dict | None = None,
    dataset: Dataset | None = None,
    *,
    ci: float | None = None,
    pairs=None,
    ppc=None,
    items: pd.DataFrame | None = None,
) -> list[Path]:
    """Write ``report.html``, ``report.md`` and ``figures/*.png`` into a run folder.

    Parameters
    ----------
    run_dir : str or Path
        The run folder.
    idata : arviz.InferenceData, optional
        Loaded from ``posterior.nc`` when None.
    diagnostics : dict, optional
        Loaded from ``diagnostics.json`` when None.
    dataset : Dataset, optional
        The fitted data; rebuilt from the idata (:func:`dataset_from_idata`) when None.
    ci : float, optional
        Interval level; defaults to the run's (``diagnostics["ci"]``), else 0.95.
    pairs : Pairs, optional
        The distilled arena pairs (recomputed by the checks when None).
    ppc : PPC, optional
        The run's :func:`~bayes_dualeval.checks.ppc.posterior_predictive` result at level
        ``ci`` (computed when None).
    items : pandas.DataFrame, optional
        The run's :func:`~bayes_dualeval.checks.ppc.item_table` at level ``ci`` (read from
        ``items.csv``, or computed, when None).

    Returns
    -------
    list of Path
        The files written: the HTML, the Markdown and the figures.

    Raises
    ------
    InputError
        If the run folder cannot be read.

    Warns
    -----
    ReportWarning
        When a panel cannot be drawn (the report is written without it).

    Examples
    --------
    >>> from bayes_dualeval.report.document import write_report
    >>> write_report("runs/20260101-120000-nuts")  # doctest: +SKIP
    """
    from bayes_dualeval.runs.fit import load_run

    run_dir = Path(run_dir)
    if idata is None or diagnostics is None:
        loaded_idata, loaded_diag = load_run(run_dir)
        idata = loaded_idata if idata is None else idata
        diagnostics = loaded_diag if diagnostics is None else diagnostics
    if dataset is None:
        norm = diagnostics.get("data", {}).get("reward_norm")
        dataset = dataset_from_idata(idata, reward_norm=norm)
    if ci is None:
        ci = float(diagnostics.get("ci") or 0.95)
    doc = build(run_dir, idata, diagnostics, dataset, ci=ci, pairs=pairs, ppc=ppc, items=items)
    written = []
    fig_dir = run_dir / FIGURES_DIR
    for name, png in doc.figures.items():
        written.append(atomic.write_bytes(fig_dir / f"{name}.png", png))
    for name in FIGURES:
        stale = fig_dir / f"{name}.png"
        if name not in doc.figures and stale.is_file():
            stale.unlink()
    title = f"Bayesian DualEval report: {run_dir.name}"
    md = "\n".join(doc.md).rstrip() + "\n"
    written.insert(0, atomic.write_text(run_dir / MD_FILE, md))
    written.insert(0, atomic.write_text(run_dir / HTML_FILE, _page(doc, title)))
    return written
