"""`pyaisvc generate --backend reference --model smol "text"`: a continuation (greedy or sampled).

    pyaisvc generate --model smol --max-new-tokens 8 "The capital of France is"
    prompt ids: 504 3575 282 4649 314
    ids: 7042 30 198 198 504 2988 314 42
    text:  Paris.
    <BLANKLINE>
    The answer is:

The text is encoded with the model's tokenizer, the backend produces the new
token ids, and they are decoded back. Data goes to stdout, timings to stderr.
Backends: `guest` (default: boots the guest under QEMU with the model's image
and runs `llmrun_smol` / `llmrun_qwen` there, printing its timing line),
`service` (the same guest, through the kernel AI service: `ai gen` submits
the request to the resident worker and streams its ids with `ai_stream`)
and `reference` (the numpy forward pass of docs/ARITHMETIC.md). The guest
backends boot `--cpus` harts (default: the host's cores, at most 4) and say on
stderr how many, with the RAM. `--temp T`
(with `--top-k`, `--top-p`, `--seed`) samples instead of taking the most likely
token; the guest samples (user/llm/sample.c) and the reference draws the same
tokens for the same seed (pyaisvc/model/sampling.py); so does the service's worker,
which takes the decimals with at most 6 places (struct ai_opts).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pyaisvc.commands import add_sampling_arguments, sampling_options
from pyaisvc.errors import CommandError
from pyaisvc.guest.llmguest import (
    MODELS,
    LlmGuestError,
    check_assets,
    check_request,
    id_args,
    parse_output,
    prepare,
    seq_len,
    service_ids,
    timing_line,
)
from pyaisvc.guest.qemu import Guest, QemuConfig, default_cpus
from pyaisvc.model.assets import load_assets
from pyaisvc.model.reference import Reference
from pyaisvc.model.sampling import SamplingError, SamplingOptions
from pyaisvc.model.tokenizer import load_tokenizer


@dataclass
class Result:
    ids: list[int]  # the new token ids
    timings: str  # one line for stderr


@dataclass(frozen=True)
class Request:
    """What a backend computes: n_new tokens after prompt, for model."""

    model: str
    assets_dir: Path
    prompt: list[int]
    n_new: int
    sampling: SamplingOptions
    cpus: int  # the guest's harts (the guest backends)


def _run_reference(assets_dir: Path, prompt: list[int], n_new: int,
                   sampling: SamplingOptions) -> Result:
    """n_new ids after prompt from the numpy reference, with how long loading and generating
    took."""
    t0 = time.monotonic()
    ref = Reference(load_assets(assets_dir))
    t1 = time.monotonic()
    ids = ref.generate(prompt, n_new, sampler=sampling.sampler())
    t2 = time.monotonic()
    return Result(ids, f"reference: load {t1 - t0:.2f} s, {len(prompt)} prompt + {len(ids)} new "
                       f"tokens in {t2 - t1:.2f} s")


def _boot(req: Request) -> Guest:
    """The model's guest for req, not yet booted (a context manager boots it)."""
    spec = MODELS[req.model]
    root = Path(__file__).resolve().parents[2]
    built = prepare(root, spec, req.assets_dir if req.assets_dir != spec.assets else None)
    return Guest(QemuConfig(kernel=built.kernel, image=built.image, ram=spec.ram,
                            cpus=req.cpus, snapshot=True))


def _say_booted(guest: Guest) -> None:
    """Prints the boot time and the guest's size on stderr."""
    print(f"generate: booted to the shell prompt in {guest.boot_seconds:.2f} s "
          f"({guest.harts} harts, {guest.ram_mib} MiB)", file=sys.stderr, flush=True)


def _run_guest(req: Request) -> Result:
    """The ids llmrun_* generates for req in a booted guest, with its timing line."""
    spec = MODELS[req.model]
    prompt, n_new = req.prompt, req.n_new
    cmd = " ".join([spec.program, "--predict", str(n_new), *req.sampling.guest_args(),
                    id_args(prompt)])
    with _boot(req) as guest:
        _say_booted(guest)
        # Loading reads the whole model; allow for a slow, busy host.
        output = guest.run(cmd, timeout=120 + 10 * (len(prompt) + n_new))
    timing, ids = parse_output(output, spec.program, n_new)
    return Result(list(ids), timing_line(spec.program, timing))


def _run_service(req: Request) -> Result:
    """The ids the kernel AI service generates for req (`ai gen` at the guest's shell), with
    the host's wall time; CommandError when the service refuses."""
    try:
        flags = " ".join(req.sampling.service_args())
    except SamplingError as e:
        raise CommandError(f"generate: {e}") from e
    prompt, n_new = req.prompt, req.n_new
    with _boot(req) as guest:
        _say_booted(guest)
        t0 = time.monotonic()
        # one word per id: the ai tool reads one id per argument
        output = guest.run(f"ai gen {flags} {n_new} {' '.join(map(str, prompt))}",
                           timeout=120 + 10 * (len(prompt) + n_new))
        wall = time.monotonic() - t0
    try:
        ids = service_ids(output)
    except LlmGuestError as e:
        raise CommandError(f"generate: {e}") from None
    return Result(ids, f"service: {len(prompt)} prompt + {len(ids)} new tokens streamed "
                       f"through the AI service in {wall:.2f} s (host wall clock)")


def _run_reference_backend(req: Request) -> Result:
    """The reference backend for req (_run_reference)."""
    return _run_reference(req.assets_dir, req.prompt, req.n_new, req.sampling)


# backend name -> function(request); one line per backend.
BACKENDS: dict[str, Callable[[Request], Result]] = {
    "guest": _run_guest,
    "service": _run_service,
    "reference": _run_reference_backend,
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The generate flags: backend, model, assets, new tokens, tokenizer, harts, sampling,
    the prompt text."""
    parser.add_argument("--backend", choices=sorted(BACKENDS), default="guest",
                        help="who computes the tokens (default guest: llmrun in QEMU)")
    parser.add_argument("--model", choices=sorted(MODELS), default="smol",
                        help="which model and tokenizer (default smol)")
    parser.add_argument("--assets", type=Path, help="asset directory or zip (default "
                        + " or ".join(str(m.assets) for m in MODELS.values()) + ")")
    parser.add_argument("--max-new-tokens", type=int, default=8,
                        help="tokens to generate (default 8)")
    parser.add_argument("--tokenizer-file", help="use this local tokenizer.json instead")
    parser.add_argument("--cpus", type=int, default=default_cpus(), help="guest harts "
                        f"(default: the host's cores, at most 4; {default_cpus()} here)")
    add_sampling_arguments(parser)
    parser.add_argument("text", help="the prompt")


def run(args: argparse.Namespace) -> int:
    """pyaisvc generate: the prompt's ids, the generated ids and their text on stdout, the
    timings on stderr; the guest's limits are checked before anything boots. 0, or
    CommandError."""
    if args.max_new_tokens < 1:
        raise CommandError(f"generate: --max-new-tokens {args.max_new_tokens} must be >= 1")
    sampling = sampling_options(args, "generate")
    assets_dir = args.assets if args.assets is not None else MODELS[args.model].assets
    tok = load_tokenizer(args.model, args.tokenizer_file)
    prompt = tok.encode(args.text)
    if not prompt:
        raise CommandError("generate: the prompt encodes to no tokens; give some text")
    if args.backend == "guest":  # the runtime's limits, checked before anything boots
        spec = MODELS[args.model]
        root = Path(__file__).resolve().parents[2]
        assets = check_assets(root, spec, args.assets)
        check_request(len(prompt), args.max_new_tokens, seq_len(assets), "--max-new-tokens")
    result = BACKENDS[args.backend](Request(args.model, assets_dir, prompt,
                                            args.max_new_tokens, sampling, args.cpus))
    print("prompt ids: " + " ".join(str(i) for i in prompt))
    print("ids: " + " ".join(str(i) for i in result.ids))
    print("text: " + tok.decode(result.ids))
    sys.stdout.flush()
    print(result.timings, file=sys.stderr)
    return 0
