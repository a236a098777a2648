"""``enerf compare``: run scenes x modes x seeds and write compare.md / .csv and plots.

Options of the grid are fields of ``enerf.config.CompareConfig`` (their flags are generated);
options of how the runs are launched, which are not part of the grid, go in
``add_launch_flags``."""

from __future__ import annotations

from ..config import DATA_ROOT, CompareConfig
from ..runfolder import check_output_dir
from .common import OneLineParser, add_config_flags, config_from_args

__all__ = ["cmd_compare", "build_compare_parser"]


def add_launch_flags(parser) -> None:
    """Flags about running the grid rather than what it contains."""
    parser.add_argument("--config", nargs="+", default=None,
                        help="config file of every run, and / or SCENE=FILE for one scene's runs "
                             "(e.g. fern=configs/fern_cpu.txt lego=configs/lego_cpu.txt)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def build_compare_parser() -> OneLineParser:
    parser = OneLineParser(
        prog="enerf compare", description="Run scenes x modes x seeds and write compare.md / .csv and plots.",
        epilog="Flags after -- go to every run, e.g. enerf compare --modes none row -- --iters 500")
    add_launch_flags(parser)
    add_config_flags(parser, CompareConfig)
    return parser


def cmd_compare(argv: list[str]) -> int:
    from ..compare.compare import run_compare

    extra: list[str] = []
    if "--" in argv:
        cut = argv.index("--")
        argv, extra = argv[:cut], argv[cut + 1 :]
    args = build_compare_parser().parse_args(argv)
    cfg = config_from_args(CompareConfig, args)
    check_output_dir(cfg.out, "--out")
    result = run_compare(cfg, args.config, extra, progress=not args.quiet, data_root=DATA_ROOT)
    print("wrote " + ", ".join(str(p) for p in result["outputs"]))
    if result.get("view"):
        print(f"best vanilla and conditioned runs side by side in the browser: {result['view']}")
    return 0
