"""Command-line options generated from the settings dataclasses (nothing is fitted here)."""

import dataclasses
import inspect
import re
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from bayes_dualeval.cli import options
from bayes_dualeval.cli.check import check
from bayes_dualeval.cli.commands import cli
from bayes_dualeval.cli.fit import build_settings, fit
from bayes_dualeval.cli.shared import to_flags
from bayes_dualeval.cli.simulate import simulate
from bayes_dualeval.core.errors import ConfigError, InputError
from bayes_dualeval.data.distill import DEFAULT_BB_RATIO, DEFAULT_TIE_RATIO
from bayes_dualeval.inference.settings import SamplerSettings, bounds_text
from bayes_dualeval.model.config import DEFAULT_MODEL, ModelConfig, load_spec

DATA = Path(__file__).resolve().parent.parent / "data"

# the options that README, docs and scripts use: name -> default (None: the spec's value)
DOCUMENTED = {
    "--sampler": "nuts",
    "--model": "dualeval-2pl",
    "--mode": None,
    "--irt": None,
    "--item-prior": None,
    "--arena-likelihood": None,
    "--arena-level": None,
    "--lambda-static": None,
    "--lambda-arena": None,
    "--lambda-bb": None,
    "--bb-ratio": None,
    "--tie-ratio": None,
    "--theta-scale": None,
    "--gamma-scale": None,
    "--b-scale": None,
    "--loga-scale": None,
    "--chains": 4,
    "--warmup": 400,
    "--draws": 1000,
    "--seed": 0,
    "--target-accept": 0.8,
    "--max-tree-depth": 8,
    "--extend": 2,
    "--guide": "normal",
    "--svi-steps": 20000,
    "--ci": 0.95,
    "--out": None,
    "--device": "auto",
    "--no-report": False,
    "--quiet": False,
    "--reward-norm": "source",
    "--skip-invalid": False,
}


def by_name(command: click.Command) -> dict:
    return {p.name: p for p in command.params}


def by_flag(command: click.Command) -> dict:
    return {flag: p for p in command.params for flag in p.opts}


def help_text(option: click.Option, command: click.Command = fit) -> str:
    return option.get_help_record(click.Context(command))[1]


def option_fields(cls) -> list:
    return [f for f in dataclasses.fields(cls) if "help" in f.metadata]


def fit_fields(params: dict) -> dict:
    """The dataclass-generated values among ``fit``'s parsed parameters."""
    names = {f.name for cls in (SamplerSettings, ModelConfig) for f in option_fields(cls)}
    return {k: v for k, v in params.items() if k in names}


def parse_fit(*args) -> dict:
    return fit.make_context("fit", [str(DATA), *args]).params


# --------------------------------------------------------------------------- generated options


def test_the_documented_fit_options_keep_their_names_and_defaults():
    flags, parsed = by_flag(fit), parse_fit()
    for flag, default in DOCUMENTED.items():
        assert flag in flags, flag
        assert parsed[flags[flag].name] == default, flag
    assert "-q" in flags["--quiet"].opts


def test_every_sampler_setting_is_an_option_with_the_fields_default_and_help():
    params = by_name(fit)
    fields = option_fields(SamplerSettings)
    # every field but the progress bar, which is -q
    assert {f.name for f in fields} == {f.name for f in dataclasses.fields(SamplerSettings)} - {
        "progress"
    }
    for f in fields:
        option = params[f.name]
        assert option.opts == ["--" + f.name.replace("_", "-")]
        assert option.default == f.default, f.name
        assert option.help == to_flags(f.metadata["help"]), f.name
        assert option.show_default
        if "choices" in f.metadata:
            assert list(option.type.choices) == list(f.metadata["choices"])


def test_every_model_setting_is_an_override_showing_the_default_specs_value():
    params, spec = by_name(fit), load_spec(DEFAULT_MODEL)
    fields = option_fields(ModelConfig)
    # the calibrated arena weight's factor is computed by the fit, not chosen by a user
    assert {f.name for f in fields} == {f.name for f in dataclasses.fields(ModelConfig)} - {
        "name",
        "description",
        "arena_weight_factor",
    }
    for f in fields:
        option = params[f.name]
        assert option.default is None, f.name  # given: overrides the spec; absent: the spec's
        assert option.help == to_flags(f.metadata["help"]), f.name
        value = getattr(spec, f.name)
        shown = f"{value:g}" if isinstance(value, float) else value
        assert f"[spec: {shown}" in help_text(option), f.name
    assert help_text(params["bb_ratio"]).endswith("[spec: 0.15; 0<=x<1]")
    assert help_text(params["irt"]).endswith("[spec: 2pl]")
    assert list(params["irt"].type.choices) == ["1pl", "2pl", "3pl", "4pl"]  # links.LINKS


def test_check_ratio_defaults_are_the_model_defaults():
    params = by_name(check)
    assert params["bb_ratio"].default == ModelConfig().bb_ratio == DEFAULT_BB_RATIO == 0.15
    assert params["tie_ratio"].default == ModelConfig().tie_ratio == DEFAULT_TIE_RATIO == 0.10
    assert params["bb_ratio"].help == ModelConfig.__dataclass_fields__["bb_ratio"].metadata["help"]


def test_a_changed_dataclass_field_changes_the_generated_option():
    @dataclasses.dataclass(frozen=True)
    class Changed(SamplerSettings):
        chains: int = dataclasses.field(default=7, metadata={"help": "Changed.", "min": 2})

    option = {o.name: o for o in options.setting_options(Changed)}["chains"]
    assert option.default == 7 and option.help == "Changed."
    assert option.type.min == 2 and "[default: 7; x>=2]" in help_text(option)

    @dataclasses.dataclass(frozen=True)
    class Other(ModelConfig):
        tie_ratio: float = dataclasses.field(
            default=0.25, metadata={"help": "Ties.", "min": 0, "max": 0.5}
        )

    override = {o.name: o for o in options.override_options(Other())}["tie_ratio"]
    assert override.default is None and override.help == "Ties."
    assert help_text(override).endswith("[spec: 0.25; 0<=x<=0.5]")


def test_a_changed_default_in_place_reaches_the_generated_option(monkeypatch):
    monkeypatch.setattr(SamplerSettings.__dataclass_fields__["draws"], "default", 321)
    assert {o.name: o for o in options.setting_options(SamplerSettings)}["draws"].default == 321


def test_simulate_defaults_are_the_simulators():
    from bayes_dualeval.model.simulate import simulate as simulator

    defaults = {k: p.default for k, p in inspect.signature(simulator).parameters.items()}
    params = by_name(simulate)
    renamed = {"n_models": "n_models", "static_items": "n_static", "arena_prompts": "n_arena"}
    renamed |= {"domains": "n_domains"}
    names = ("missing", "reward_noise", "prompt_offset_sd", "guess", "slip", "domain_sd", "seed")
    for name in names + ("dims", "dim_correlation", "dim_loading"):
        renamed[name] = name
    for option, argument in renamed.items():
        assert params[option].default == defaults[argument], option
    assert params["log_a"].default == (defaults["log_a_mean"], defaults["log_a_sd"])


# --------------------------------------------------------------------------- values reach the run


def test_irt_3pl_and_sampler_options_reach_the_settings():
    params = parse_fit("--irt", "3pl", "--guess-mean", "0.3", "--sampler", "map", "--chains", "2")
    config, settings = build_settings(params["model_name"], fit_fields(params), progress=False)
    assert config.irt == "3pl" and config.guess_mean == 0.3
    assert config.name == DEFAULT_MODEL and config.bb_ratio == load_spec(DEFAULT_MODEL).bb_ratio
    assert settings.sampler == "map" and settings.chains == 2 and not settings.progress
    assert settings.svi_steps == SamplerSettings().svi_steps


def test_options_override_the_chosen_spec_only_where_given():
    params = parse_fit("--model", "dualeval-paper")
    config, _ = build_settings(params["model_name"], fit_fields(params), progress=True)
    assert config == load_spec("dualeval-paper")
    params = parse_fit("--model", "dualeval-paper", "--irt", "4pl", "--ceiling-mean", "0.9")
    config, _ = build_settings(params["model_name"], fit_fields(params), progress=True)
    assert config == load_spec("dualeval-paper").replace(irt="4pl", ceiling_mean=0.9)


def test_fit_hands_the_built_settings_to_the_library(monkeypatch, tmp_path):
    """The whole command, stopped where the fit would start: what it is asked to fit."""
    seen = {}

    def stop(dataset, config, settings, **kwargs):
        seen.update(config=config, settings=settings)
        raise InputError("stopped before fitting")

    monkeypatch.setattr("bayes_dualeval.runs.fit.fit", stop)
    args = ["fit", str(DATA), "--irt", "4pl", "--sampler", "svi", "--guide", "lowrank"]
    result = CliRunner().invoke(cli, [*args, "--device", "cpu", "-q", "--out", tmp_path / "r"])
    assert result.exit_code == 1, result.output
    assert result.output.strip().splitlines()[-1] == "Error: stopped before fitting"
    assert seen["config"].irt == "4pl" and seen["config"].mode == "both"
    assert seen["settings"].sampler == "svi" and seen["settings"].guide == "lowrank"
    assert not (tmp_path / "r").exists()


# --------------------------------------------------------------------------- user mistakes


def assert_one_error_line(result, code, *expected):
    assert result.exit_code == code, result.output
    assert "Traceback" not in result.output
    errors = [line for line in result.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, result.output
    for text in expected:
        assert text in errors[0], result.output


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--irt", "5pl"], "Invalid value for '--irt': '5pl' is not one of"),
        (["--guess-mean", "1"], "Invalid value for '--guess-mean'"),
        (["--theta-scale", "0"], "Invalid value for '--theta-scale'"),
        (["--lambda-bb", "-0.1"], "Invalid value for '--lambda-bb'"),
        (["--max-tree-depth", "16"], "Invalid value for '--max-tree-depth'"),
        (["--svi-lr", "0"], "Invalid value for '--svi-lr'"),
        (["--centring", "some"], "Invalid value for '--centring'"),
        (["--chains", "two"], "'two' is not a valid integer"),
    ],
)
def test_invalid_values_are_one_clean_error_line(args, expected):
    result = CliRunner().invoke(cli, ["fit", str(DATA), *args])
    assert_one_error_line(result, 2, expected)


def test_an_unknown_spec_is_one_clean_error_line(tmp_path):
    result = CliRunner().invoke(cli, ["fit", str(DATA), "--model", "nope", "--device", "cpu"])
    assert_one_error_line(result, 1, "unknown model 'nope'; available:", DEFAULT_MODEL)


def test_settings_are_validated_from_the_same_metadata():
    for changes, message in [
        ({"chains": 0}, "chains must be at least 1, got 0"),
        ({"warmup": -1}, "warmup must be non-negative, got -1"),
        ({"target_accept": 1.0}, "target_accept must be in (0, 1), got 1.0"),
        ({"max_tree_depth": 16}, "max_tree_depth must be in [1, 15], got 16"),
        ({"svi_lr": 0.0}, "svi_lr must be positive, got 0.0"),
        ({"sampler": "hmc"}, "sampler must be one of nuts, svi, map; got 'hmc'"),
    ]:
        with pytest.raises(ConfigError) as caught:
            SamplerSettings(**changes)
        assert str(caught.value) == message
    assert bounds_text({"min": 2, "min_open": True}) == "greater than 2"
    assert bounds_text({"min": 0, "max": 1, "max_open": True}) == "in [0, 1)"
    assert bounds_text({"max": 3}) == "at most 3"


def test_model_config_rejects_what_its_option_ranges_reject():
    """The ranges in ModelConfig's metadata (the CLI's) agree with its own validation."""
    checked = 0
    for f in option_fields(ModelConfig):
        meta = f.metadata
        outside = []
        if "min" in meta:
            outside.append(meta["min"] if meta.get("min_open") else meta["min"] - 0.5)
        if "max" in meta:
            outside.append(meta["max"] if meta.get("max_open") else meta["max"] + 0.5)
        for value in outside:
            with pytest.raises(ConfigError, match=f.name):
                ModelConfig(**{f.name: value})
            checked += 1
        if "choices" in meta:
            with pytest.raises(ConfigError, match=f.name):
                ModelConfig(**{f.name: "nonsense"})
    assert checked >= 20


# --------------------------------------------------------------------------- help


def test_fit_help_lists_each_option_once_under_its_heading():
    result = CliRunner().invoke(cli, ["fit", "-h"], terminal_width=100)
    assert result.exit_code == 0
    text = result.output
    headings = [
        "Sampler:",
        "NUTS:",
        "SVI and MAP:",
        "Model:",
        "Likelihood (override the --model spec):",
        "Priors (override the --model spec):",
        "Data:",
        "Run:",
        "Options:",
    ]
    positions = [text.index("\n" + h + "\n") for h in headings]
    assert positions == sorted(positions)
    listed = re.findall(r"^  (?:-\w, )?(--[\w-]+)", text, flags=re.MULTILINE)
    params = fit.get_params(click.Context(fit))  # with -h
    assert len(listed) == len(set(listed)) == len([p for p in params if p.opts[0][0] == "-"])
    assert set(DOCUMENTED) <= set(listed)
    likelihood = text[positions[4] : positions[5]]
    assert "--irt [1pl|2pl|3pl|4pl]" in likelihood and "--guess-mean" not in likelihood
    assert "--guess-mean" in text[positions[5] : positions[6]]
    assert "--max-tree-depth" in text[positions[1] : positions[2]]
