"""Every file in configs/ parses to the config its text says: a tiny independent ``key = value``
reader builds the expected dataclasses from the defaults, and the CLI's parser must agree with
them on every field; each device preset holds the values of the example file of the same name
in configs/ (less the scene's identity), and every file there is written from
its recipe (enerf.config.recipes). Also:
every flag has help text, and ``enerf --version``."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
import typing
from pathlib import Path

import pytest

import enerf
from enerf.cli import build_train_parser, run_config_from_args
from enerf.cli.common import config_from_args
from enerf.cli.shape import build_shape_train_parser
from enerf.config import RunConfig, ShapeRunConfig
from enerf.config import presets, recipes
from enerf.config.resolve import SceneShape, resolve
from enerf.config.spec import flag_names
from enerf.errors import ConfigError

CONFIGS = Path(__file__).resolve().parents[2] / "configs"
# nerf-pytorch spellings of three fields (flag -> field); every other key is a field's own name.
CAPITALISED = {"N_rand": "n_rand", "N_samples": "n_samples", "N_importance": "n_importance"}


def read_keys(path: Path) -> dict[str, str]:
    """``key = value`` lines of a config file, comments and blank lines dropped."""
    keys = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            key, _, value = line.partition("=")
            keys[key.strip()] = value.strip()
    return keys


def spelled(tp) -> str:
    """A resolved annotation as written: ``int``, ``tuple[float, ...]``; a ``Literal`` of strings is ``str``."""
    if typing.get_origin(tp) is tuple:
        return f"tuple[{typing.get_args(tp)[0].__name__}, ...]"
    return "str" if typing.get_origin(tp) is typing.Literal else tp.__name__


def convert(text: str, annotation: str):
    """The value ``text`` means for a field annotated ``annotation`` (``int``, ``tuple[float, ...]`` ...)."""
    if annotation.startswith("tuple["):
        item = annotation[len("tuple["):].split(",")[0]
        return tuple(convert(t.strip(), item) for t in text.strip("[]").split(",") if t.strip())
    if annotation == "bool":
        return {"true": True, "false": False}[text.lower()]
    return {"int": int, "float": float, "str": str}[annotation](text)


def expected_config(root_cls, keys: dict[str, str]):
    """``root_cls`` defaults with ``keys`` applied, each to the one section that has the field."""
    top, sections = {}, {}
    section_classes = {f.name: f.default_factory for f in dataclasses.fields(root_cls) if f.default_factory is not dataclasses.MISSING}
    for key, text in keys.items():
        name = CAPITALISED.get(key, key)
        if name in ("expname", "basedir"):
            top[name] = text
            continue
        owners = [(s, f) for s, cls in section_classes.items() for f in dataclasses.fields(cls) if f.name == name]
        assert len(owners) == 1, (key, owners)
        section, f = owners[0]
        sections.setdefault(section, {})[name] = convert(text, spelled(f.type))
    return root_cls(**top, **{s: cls(**sections.get(s, {})) for s, cls in section_classes.items()})


NERF_FILES = sorted(p for p in CONFIGS.glob("*.txt") if not p.name.startswith("shape"))
SHAPE_FILES = sorted(CONFIGS.glob("shape*.txt"))


def test_there_are_config_files_of_both_kinds():
    assert len(NERF_FILES) >= 5 and len(SHAPE_FILES) >= 2


@pytest.mark.parametrize("path", NERF_FILES, ids=[p.name for p in NERF_FILES])
def test_nerf_config_file_parses_to_what_its_text_says(path):
    keys = read_keys(path)
    parsed = run_config_from_args(build_train_parser().parse_args(["--config", str(path)]))
    assert parsed == expected_config(RunConfig, keys)
    assert parsed != RunConfig()  # the file changed something


@pytest.mark.parametrize("path", SHAPE_FILES, ids=[p.name for p in SHAPE_FILES])
def test_shape_config_file_parses_to_what_its_text_says(path):
    parsed = config_from_args(ShapeRunConfig, build_shape_train_parser().parse_args(["--config", str(path)]))
    assert parsed == expected_config(ShapeRunConfig, read_keys(path))


# (preset, layout) -> (dataset type, what the cameras show, its recipe = its example file's name)
PRESET_RECIPES = {("cpu", "llff"): ("llff", "forward", "fern_cpu"), ("cpu", "blender"): ("blender", "walkaround", "lego_cpu"),
                  ("cpu", "capture"): ("nerfstudio", "walkaround", "capture_cpu"),
                  ("cuda", "llff"): ("llff", "forward", "fern_cuda"), ("cuda", "blender"): ("blender", "walkaround", "lego_cuda"),
                  ("cuda", "capture"): ("nerfstudio", "walkaround", "capture_cuda"),
                  ("paper", "llff"): ("llff", "forward", "fern"), ("paper", "blender"): ("blender", "walkaround", "lego")}
# The keys that name the scene, the run or the method: an example file sets them, a preset never does.
IDENTITY = {"expname", "basedir", "scene", "datadir", "dataset_type", "llffhold", "conditioning", "conditioned_layers"}
# What an example file may set beyond its preset: the identity, and the factor the cpu / paper presets leave to the loader.
EXAMPLE_ONLY = IDENTITY | {"factor"}
FIELDS = {f.name: f for cls in (RunConfig().data, RunConfig().field, RunConfig().render, RunConfig().train)
          for f in dataclasses.fields(cls)}


def typed_keys(path: Path) -> dict:
    """Field name -> value of each key of ``path``, read by the test's own reader (``read_keys``, ``convert``)."""
    keys = {CAPITALISED.get(k, k): text for k, text in read_keys(path).items()}
    return {k: convert(text, spelled(FIELDS[k].type)) if k in FIELDS else text for k, text in keys.items()}


def test_every_config_file_is_written_from_its_recipe():
    """configs/*.txt (the NeRF ones) are exactly what ``python -m enerf.config.recipes configs`` writes:
    one file per recipe, none by hand."""
    assert sorted(p.stem for p in NERF_FILES) == sorted(recipes.RECIPES)
    flags = flag_names(RunConfig)
    for path in NERF_FILES:
        assert path.read_text() == recipes.example_text(path.stem, flags), path.name


def test_every_preset_has_a_recipe_and_an_example():
    assert set(PRESET_RECIPES) == set(presets.PRESETS)
    assert all((CONFIGS / f"{name}.txt").is_file() for _, _, name in PRESET_RECIPES.values())
    assert IDENTITY == set(presets.IDENTITY_KEYS) and not any(IDENTITY & set(r.sets) for r in recipes.RECIPES.values())


@pytest.mark.parametrize("key", sorted(PRESET_RECIPES), ids=["-".join(k) for k in sorted(PRESET_RECIPES)])
def test_a_preset_is_its_example_file_less_the_identity(key):
    """A preset's values are those of its example file (read by the test's own reader) less the
    scene's identity (and, for the cpu / paper presets, a factor), plus what the scene says."""
    dataset_type, kind, name = PRESET_RECIPES[key]
    preset = presets.preset_for(key[0], dataset_type, kind)
    assert (preset.name, preset.layout, preset.recipe, preset.example) == (key[0], key[1], name, f"configs/{name}.txt")
    assert preset.source == f"enerf's preset {name} (example file: configs/{name}.txt)"
    example = typed_keys(CONFIGS / f"{name}.txt")
    expected = {k: v for k, v in example.items() if k not in EXAMPLE_ONLY or (k == "factor" and key[0] == "cuda")}
    assert len(expected) > 10 and ("factor" in expected) == (key[0] == "cuda")  # the cuda presets set the photos' size
    if dataset_type != "blender":
        expected["scene_kind"] = kind
    if dataset_type == "nerfstudio":  # a photo capture's run ends in splats, after a shorter field on a CPU
        expected["splat_seconds"] = presets.CAPTURE_SPLAT_SECONDS
        if key[0] == "cpu":
            expected["time_budget"] = presets.CAPTURE_FIELD_SECONDS
    assert preset.values == expected


def test_an_overlay_changes_only_what_it_sets():
    """fern_cuda is fern_cpu with its CUDA overlay: every other value is the cpu recipe's."""
    cpu, cuda = recipes.values("fern_cpu"), recipes.values("fern_cuda")
    assert {k for k in cuda if cuda[k] != cpu.get(k)} == set(recipes.RECIPES["fern_cuda"].sets)
    assert (cuda["n_rand"], cuda["lrate"]) == (4096, cpu["lrate"])


def test_presets_need_no_file(tmp_path, monkeypatch):
    """Nothing in enerf/ names the repository's configs/ folder as a place to read; the presets are
    Python values, also with another working directory."""
    monkeypatch.chdir(tmp_path)
    assert presets.preset_for("cuda", "nerfstudio", "walkaround").values["n_rand"] == 4096
    root = Path(enerf.__file__).parent
    for path in root.rglob("*.py"):
        text = path.read_text()
        assert "parents[2]" not in text and "CONFIG_DIR" not in text, path


def test_resolve_overlays_flags_on_the_preset_on_the_defaults():
    """``enerf.config.resolve``: a flag beats the preset, the preset beats the default, a config
    file turns ``auto`` into no preset; an unknown name is one line."""
    scene = SceneShape("llff", "forward")
    cfg, preset = resolve({"n_rand": 77, "expname": "x"}, "cpu", scene)
    assert preset.recipe == "fern_cpu" and cfg.expname == "x"
    assert (cfg.train.n_rand, cfg.train.time_budget, cfg.train.seed) == (77, 600, RunConfig().train.seed)
    assert resolve({"n_rand": 77}, "cpu", scene, config_file=True) == (
        dataclasses.replace(RunConfig(), train=dataclasses.replace(RunConfig().train, n_rand=77)), None)
    assert resolve({}, "cuda", SceneShape("nerfstudio", "walkaround"))[1].recipe == "capture_cuda"
    with pytest.raises(ConfigError, match="^RunConfig has no option no_such_key$"):
        resolve({"no_such_key": 1}, "cpu", scene)


def test_flags_override_the_file_and_nerf_pytorch_aliases_and_inverted_flags_map(tmp_path):
    config = tmp_path / "c.txt"
    config.write_text("N_iters = 7\ni_print = 3\nrandom_seed = 5\nnetchunk = 99\nN_rand = 100\n")
    args = build_train_parser().parse_args(["--config", str(config), "--N_rand", "33", "--no_ndc", "--perturb", "0",
                                            "--no_lpips", "--grid_aabb", "-1", "-2", "-3", "1", "2", "3"])
    cfg = run_config_from_args(args)
    assert (cfg.train.iters, cfg.train.log_every, cfg.train.seed, cfg.train.n_rand) == (7, 3, 5, 33)
    assert (cfg.data.use_ndc, cfg.render.perturb, cfg.train.compute_lpips) == (False, False, False)
    assert cfg.field.grid_aabb == (-1.0, -2.0, -3.0, 1.0, 2.0, 3.0)


def test_every_flag_has_help():
    for parser in (build_train_parser(), build_shape_train_parser()):
        missing = [a.option_strings for a in parser._actions if a.option_strings and not a.help]
        assert missing == []


@pytest.mark.parametrize("module", ["enerf", "enerf.cli"])
def test_version_and_module_entry_points(module):
    proc = subprocess.run([sys.executable, "-m", module, "--version"], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.strip() == f"enerf {enerf.__version__}"


@pytest.mark.parametrize("build, root", [(build_train_parser, RunConfig), (build_shape_train_parser, ShapeRunConfig)],
                         ids=["train", "shape-train"])
def test_help_lists_each_section_under_its_name(build, root, capsys):
    """``--help`` groups the flags by config section: group ``data`` holds exactly the flags of the
    data section's fields, and so on; ``run`` holds expname and basedir."""
    parser = build()
    groups = {g.title: {a.dest for a in g._group_actions} for g in parser._action_groups}
    for f in dataclasses.fields(root):
        if f.default_factory is not dataclasses.MISSING:
            expected = {f"{f.name}.{s.name}" for s in dataclasses.fields(f.default_factory) if s.metadata.get("cli", True)}
            assert groups[f.name] == expected, f.name
    assert groups["run"] == {"expname", "basedir"}
    with pytest.raises(SystemExit):
        parser.parse_args(["--help"])
    out = capsys.readouterr().out
    titles = [line[:-1] for line in out.splitlines() if line and not line[0].isspace() and line.endswith(":")]
    assert titles[:2] == ["options", "run"] and set(titles) >= {"data", "field", "train"}


def test_a_deleted_flag_is_refused_and_old_checkpoints_still_load():
    from enerf.config import run_config_from_dict

    with pytest.raises(ConfigError, match="unrecognized arguments: --stop_at_psnr"):
        build_train_parser().parse_args(["--stop_at_psnr", "30"])
    old = RunConfig().to_dict()
    old["train"] = {**old["train"], "stop_at_psnr": 25.0}  # a checkpoint written while the flag existed
    assert run_config_from_dict(old) == RunConfig()


def test_the_sampler_flag_and_its_earlier_name(tmp_path):
    """``--sampler`` sets the run's sampler; ``--renderer`` (its earlier name, in older config files and
    commands) sets the same field."""
    parser = build_train_parser()
    for argv in (["--sampler", "torch_grid"], ["--renderer", "torch_grid"]):
        assert run_config_from_args(parser.parse_args(argv)).render.sampler == "torch_grid"
    old = tmp_path / "old.txt"
    old.write_text("renderer = proposal\n")
    assert run_config_from_args(build_train_parser().parse_args(["--config", str(old)])).render.sampler == "proposal"
