"""``dpaudit epsilon-star`` and ``scores``: the audits of your own attack's losses or scores (Epsilon*,
the scores auditor's ε lower bounds and evidence), and :func:`load_losses`, which reads their input
files (``one-run`` reads them too: :mod:`.one_run`)."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from dpaudit.cli.args import (
    CliError,
    half_open_unit,
    non_negative_int,
    open_unit,
    positive_int,
    unit_from_zero,
)


def load_losses(
    path: str, argument: str, column: str | None = None, minimum: int = 2, default_column: str = "loss"
) -> Any:
    """Read a 1-D array of numbers from .npy, .csv or .parquet; every problem names ``argument``.

    CSV and Parquet files need exactly one column, a column named ``column`` if given, or one named
    ``default_column`` (``loss``; ``score`` for the scores command); a CSV may have a header row
    or none. Refused, with exit 2: a missing path, a directory, an empty (0-byte) file, an
    unreadable or unsupported file, a 2-D array, a missing column, fewer than ``minimum`` values,
    NaN or infinite values.
    """
    import numpy as np

    file = Path(path)
    if file.is_dir():
        raise CliError(argument, f"{path} is a directory, not a file")
    if not file.exists():
        raise CliError(argument, f"file {path} does not exist")
    if not file.is_file():
        raise CliError(argument, f"{path} is not a regular file")
    if file.stat().st_size == 0:
        raise CliError(argument, f"{path} is empty (0 bytes)")
    suffix = file.suffix.lower()
    try:
        if suffix == ".npy":
            values = np.load(file, allow_pickle=False)
        elif suffix in (".csv", ".parquet"):
            values = _load_table(file, suffix, argument, column, default_column)
        else:
            raise CliError(argument, f"{path}: unsupported file type {suffix!r} (use .npy, .csv or .parquet)")
        if np.iscomplexobj(values):  # float64 conversion would silently drop the imaginary parts
            raise CliError(argument, f"{path} holds complex numbers ({values.dtype}); scores must be real")
        values = np.asarray(values, dtype=np.float64)
    except CliError:
        raise
    except (ValueError, TypeError, OSError, EOFError, KeyError, ImportError) as exc:
        raise CliError(argument, f"cannot read numbers from {path}: {exc}") from exc
    if values.ndim != 1 and not (values.ndim == 2 and 1 in values.shape):
        raise CliError(argument, f"{path} must hold a 1-D array, got shape {values.shape}")
    values = values.ravel()
    if values.size == 0:
        raise CliError(argument, f"{path} holds no values")
    if values.size < minimum:
        raise CliError(argument, f"{path} holds {values.size} values; at least {minimum} are needed")
    if not np.all(np.isfinite(values)):
        bad = int(np.sum(~np.isfinite(values)))
        raise CliError(argument, f"{path} contains {bad} NaN or infinite values")
    return values


def _load_table(file: Path, suffix: str, argument: str, column: str | None, default_column: str) -> Any:
    import pandas as pd

    if suffix == ".parquet":
        frame = pd.read_parquet(file)
    else:
        try:
            frame = pd.read_csv(file, header=None)
        except pd.errors.EmptyDataError:
            raise CliError(argument, f"{file} holds no values") from None
        try:
            frame.iloc[0].astype(float)
        except (ValueError, TypeError):
            frame = pd.read_csv(file)
        except IndexError:
            raise CliError(argument, f"{file} holds no values") from None
    wanted = column or default_column
    if column is not None and column not in frame.columns:
        raise CliError(
            argument, f"{file} has no column {column!r} (columns: {list(map(str, frame.columns))})"
        )
    if column is None and frame.shape[1] == 1:
        series = frame.iloc[:, 0]
    elif wanted in frame.columns:
        series = frame[wanted]
    else:
        raise CliError(
            argument, f"{file} has {frame.shape[1]} columns; expected one, or one named {wanted!r} (--column)"
        )
    return pd.to_numeric(series, errors="raise").to_numpy(dtype=float)


def _configure_epsilon_star(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--members", required=True, help="member (training) losses: .npy, .csv or .parquet")
    parser.add_argument("--non-members", required=True, help="non-member losses: .npy, .csv or .parquet")
    parser.add_argument(
        "--delta", type=open_unit, default=None, help="δ (default 1/(n ln n), n = member count)"
    )
    parser.add_argument(
        "--method",
        choices=["parametric", "empirical"],
        default="parametric",
        help="parametric (App. B, default) or empirical CDFs (Eq. 7)",
    )
    parser.add_argument(
        "--permutations",
        type=positive_int,
        default=100,
        help="label permutations of the pooled losses behind the null level (default 100)",
    )
    parser.add_argument(
        "--seed", type=non_negative_int, default=0, help="seed of the permutations (default 0)"
    )


def _run_epsilon_star(args: argparse.Namespace) -> dict[str, Any]:
    """Epsilon* beside its null level at the same n: what identical member and non-member
    distributions give, from ``--permutations`` label permutations of the same pooled losses."""
    from dpaudit.bounds.epsilon_star import epsilon_star_with_null

    members = load_losses(args.members, "--members")
    nonmembers = load_losses(args.non_members, "--non-members")
    if args.delta is not None and args.delta >= 0.5:
        raise CliError("--delta", f"{args.delta} is outside (0, 0.5)")
    try:
        result = epsilon_star_with_null(
            members,
            nonmembers,
            args.delta,
            method=args.method,
            permutations=args.permutations,
            n_bootstrap=0,
            seed=args.seed,
        )
    except ValueError as exc:
        # e.g. 2 members: the default δ = 1/(n ln n) is 0.72, outside (0, 0.5).
        if args.delta is None and "members" in str(exc):
            raise CliError("--members", f"{args.members}: {exc}; give --delta") from exc
        raise CliError("--delta" if args.delta is not None else "--members", str(exc)) from exc
    return {
        "epsilon_star": result.epsilon_star,
        "delta": result.delta,
        "method": result.method,
        "ks_pvalue": result.ks_pvalue,
        "threshold": result.threshold,
        "fpr": result.fpr,
        "fnr": result.fnr,
        "n_members": result.n_members,
        "n_nonmembers": result.n_nonmembers,
        "null_mean": result.null_mean,
        "null_high": result.null_high,
        "null_pvalue": result.null_pvalue,
        "above_null": result.above_null,
        "null_permutations": result.null_permutations,
    }


def _epsilon_star_text(result: dict[str, Any]) -> list[str]:
    """Epsilon* with its null level on the same line: a value at or below it is what identical
    member and non-member distributions give at this n."""
    verdict = "above" if result["above_null"] else "NOT above"
    return [
        f"Epsilon* ({result['method']}, δ = {result['delta']:.3g}): {result['epsilon_star']:.3g}",
        f"  null level at this n (identical distributions, {result['null_permutations']} label "
        f"permutations): mean {result['null_mean']:.3g}, 95th percentile {result['null_high']:.3g}",
        f"  {verdict} the null level (permutation p = {result['null_pvalue']:.3g}); an estimate for this "
        "model, not a bound",
        "--json prints every number",
    ]


def _configure_scores(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--in", dest="in_path", required=True, help="scores of 'in' trials (D, members)")
    parser.add_argument("--out", dest="out_path", required=True, help="scores of 'out' trials (D′)")
    parser.add_argument("--delta", type=unit_from_zero, required=True, help="δ in [0, 1); 0 = pure DP")
    parser.add_argument(
        "--confidence",
        type=open_unit,
        default=0.95,
        help="level of the headline bound, joint over every bound it maximises (default 0.95)",
    )
    parser.add_argument(
        "--column", default=None, help="column to read from .csv/.parquet files with several columns"
    )
    sign = parser.add_mutually_exclusive_group()
    sign.add_argument(
        "--higher-is-member",
        dest="sign",
        action="store_const",
        const="higher",
        help="a higher score means 'in' (member, world D): attack scores, confidences, negated losses",
    )
    sign.add_argument(
        "--lower-is-member",
        dest="sign",
        action="store_const",
        const="lower",
        help="a lower score means 'in': losses (the scores are negated before the audit)",
    )
    parser.add_argument(
        "--assume",
        choices=list(SCORE_ASSUMPTIONS),
        default=None,
        help="mechanism family you GUARANTEE produced the scores: 'gaussian' (full-batch Gaussian "
        "mechanism: the GDP bound counts) or 'subsampled' (Poisson-subsampled Gaussian with "
        "--sampling-rate and "
        "--steps). Default: none; only the assumption-free threshold sweeps count",
    )
    legacy = {"dest": "assume", "choices": ["gaussian", "subsampled"], "help": argparse.SUPPRESS}
    parser.add_argument("--mechanism", **legacy)  # the earlier name of --assume
    parser.add_argument(
        "--sampling-rate", dest="q", type=half_open_unit, default=None,
        help="Poisson sampling rate q in (0, 1] for --assume subsampled (as in `dpaudit accountant`)",
    )  # fmt: skip
    parser.add_argument("--q", dest="q", type=half_open_unit, help=argparse.SUPPRESS)  # its earlier name
    parser.add_argument("--steps", type=positive_int, default=None, help="steps T for --assume subsampled")
    parser.add_argument("--seed", type=non_negative_int, default=0, help="seed of the threshold splits")


#: What each ``--assume`` value lets the headline count, besides the assumption-free sweeps.
SCORE_ASSUMPTIONS = {
    "none": "only the assumption-free threshold sweeps",
    "gaussian": "the sweeps and the GDP bound (you guarantee a full-batch Gaussian mechanism)",
    "subsampled": "the sweeps and the subsampled-Gaussian family bound (you guarantee q and T)",
}
#: Inputs at least this large show the auditor's progress bar.
SCORES_PROGRESS_FROM = 20_000


def _run_scores(args: argparse.Namespace) -> dict[str, Any]:
    from dpaudit.bounds.accountants import PLD_MAX_STEPS
    from dpaudit.bounds.auditor import audit_scores
    from dpaudit.bounds.tradeoff import SubsampledGaussian

    assume = args.assume or "none"
    mechanism = None
    if assume == "subsampled":
        for flag, value in (("--sampling-rate", args.q), ("--steps", args.steps)):
            if value is None:
                raise CliError(flag, "is required with --assume subsampled")
        if args.steps > PLD_MAX_STEPS:
            raise CliError("--steps", f"{args.steps} exceeds the PLD limit of {PLD_MAX_STEPS} steps")
        mechanism = SubsampledGaussian(args.q, args.steps)
    elif args.q is not None or args.steps is not None:
        raise CliError("--assume", "--sampling-rate and --steps need --assume subsampled")
    in_scores = load_losses(args.in_path, "--in", args.column, default_column="score")
    out_scores = load_losses(args.out_path, "--out", args.column, default_column="score")
    if args.sign == "lower":
        in_scores, out_scores = -in_scores, -out_scores
    audit = audit_scores(
        in_scores,
        out_scores,
        delta=args.delta,
        confidence=args.confidence,
        mechanism=mechanism,
        assume_gaussian=assume == "gaussian",
        seed=args.seed,
        show_progress=in_scores.size + out_scores.size >= SCORES_PROGRESS_FROM,
    )
    warnings = []
    if audit.auroc[0] < 0.5:
        hint = (
            "if these are losses, pass --lower-is-member"
            if args.sign is None
            else "check the sign flag: the attack ranks 'out' above 'in'"
        )
        warnings.append(f"AUROC {audit.auroc[0]:.3g} < 0.5: 'in' trials score LOWER than 'out' ones; {hint}")
    head = audit.headline
    bounds = {
        name: {
            "epsilon": bound.epsilon,
            "valid": bound.valid,
            "counted": bound.counted,
            "confidence": bound.confidence,
            "assumption": bound.assumption,
            **dict(bound.details),
        }
        for name, bound in audit.lower_bounds.items()
    }
    return {
        "headline": {
            "epsilon_lower": head.epsilon,
            "estimator": head.estimator,
            "assumption": head.assumption,
            "confidence": head.confidence,
            "delta": audit.delta,
            "counted": sorted(audit.counted_bounds()),
        },
        "assume": assume,
        "sign": args.sign or "higher (default)",
        "warnings": warnings,
        "lower_bounds": bounds,
        "metrics": audit.metrics(),
        "in": args.in_path,
        "out": args.out_path,
    }


def _epsilon_text(value: float) -> str:
    return "∞" if value >= 1e308 or not math.isfinite(value) else f"{value:.3g}"


def _assumes(assumption: str) -> str:
    """An assumption as the text says it: "assumes …" once (the auditor's phrases start with it)."""
    text = "nothing about the mechanism" if assumption == "none" else assumption.removeprefix("assumes ")
    return f"assumes {text}"


def _scores_text(result: dict[str, Any]) -> list[str]:
    """One screen: the verdict, the headline, every bound with its status, the attack's strength."""
    head, m = result["headline"], result["metrics"]
    level = f"{100 * head['confidence']:g} %"
    if head["epsilon_lower"] > 0:
        verdict = (
            f"PROVEN: ε ≥ {_epsilon_text(head['epsilon_lower'])} at δ = {head['delta']:g}, "
            f"{level} confidence; {_assumes(head['assumption'])}"
        )
    else:
        verdict = (
            f"NOTHING PROVEN at {level}: no threshold separates 'in' from 'out' scores well enough "
            f"at n = {int(m['n_in'])} + {int(m['n_out'])} (AUROC {m['auroc']:.3g})"
        )
    lines = [verdict]
    lines += [f"warning: {w}" for w in result["warnings"]]
    lines.append(
        f"headline: {head['estimator']}, maximum over {', '.join(head['counted'])} "
        f"(each at its Bonferroni share; joint {level}); --assume {result['assume']}"
    )
    lines.append(f"scores: {int(m['n_in'])} in, {int(m['n_out'])} out; member = {result['sign']} score")
    lines.append("bounds:")
    for name, b in result["lower_bounds"].items():
        if not b["valid"]:
            status = "estimate, not a bound (threshold chosen on the counted trials)"
        elif b["counted"]:
            status = f"counted, {100 * b['confidence']:.4g} % alone; {_assumes(b['assumption'])}"
        else:
            status = f"NOT counted: {_assumes(b['assumption'])} (declare it with --assume)"
        claim = "ε ≥" if b["counted"] else "ε   "  # an uncounted number is no claim about ε
        lines.append(f"  {name:<20} {claim} {_epsilon_text(b['epsilon']):>7}  {status}")
    lines.append(f"attack strength ({100 * m['confidence']:g} % intervals):")
    for key in m:
        if key.startswith("tpr_at_fpr_") and key.count("_") == 3:
            tag = key.removeprefix("tpr_at_fpr_").replace("p", ".")
            lines.append(
                f"  TPR at FPR {tag:<6} {m[key]:.3g}  [{m[key + '_low']:.3g}, {m[key + '_high']:.3g}]"
            )
    for name in ("auroc", "advantage"):
        lines.append(f"  {name:<17} {m[name]:.3g}  [{m[name + '_low']:.3g}, {m[name + '_high']:.3g}]")
    lines.append("--json prints every number")
    return lines
