"""Running the models in the guest: the model table, their images, requests and timing lines.

``pyaisvc generate``, ``chat`` and ``bench`` all run ``llmrun_smol`` /
``llmrun_qwen`` in a booted guest; what they share lives here, once:

- ``MODELS``: each model's guest program, asset directory in the image and on
  the host, default RAM and the make target that provides the assets;
- ``max_prompt()``, ``max_predict()``, ``max_stop()``: the most prompt ids,
  generated ids and stop ids of one request, read from AI_MAX_PROMPT,
  AI_MAX_PREDICT and AI_MAX_STOP in kernel/include/aisvc.h, and
  ``max_batch()`` the worker's batch limit, AI_BATCH there too, and
  ``POLICIES`` the scheduling policies' names, its AI_SCHED_ strings;
  ``seq_len()`` the asset
  directory's runtime_seq_len and ``check_request()`` both limits, on the
  host, before any guest boots;
- ``prepare()``: kernel, guest programs and an image holding them and a model
  (pyaisvc.image.modelimage, the recipe ``make qemu-smol`` uses too);
- ``id_args()``: prompt ids as shell arguments; ``parse_output()``,
  ``timings()`` and ``timing_pattern()``: the ids and the timing line llmrun
  prints after each request (user/llm/runtime.c), whose format is written
  down only here (``TIMING_FIELDS``)::

      llmrun_smol: timing load_us=... init_us=... ttft_us=... tpot_us=... prompt=N gen=N
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from pyaisvc import cheader
from pyaisvc.errors import AisvcError
from pyaisvc.guest.qemu import KERNEL
from pyaisvc.image.modelimage import build_model_image
from pyaisvc.model.assets import AssetError, load_config

IMAGE_DIR = Path("build/bench")
ARG_CHARS = 900  # ids per quoted argument stay below MAXARGLEN (1024, kernel/include/param.h)
IDS_LINE = re.compile(r"^\d+( \d+)*$")
TIMING_FIELDS = ("load_us", "init_us", "ttft_us", "tpot_us", "prompt", "gen")


class LlmGuestError(AisvcError):
    """A model cannot be prepared or run in the guest; the message says what to do."""


@dataclass(frozen=True)
class ModelSpec:
    """One model as the guest sees it."""

    name: str  # "smol" or "qwen": also the tokenizer's name
    title: str  # for tables and plots
    program: str  # the guest program that runs it
    guest_dir: str  # where the image holds its assets (the program's default; aisvc.h)
    assets: Path  # default host asset directory
    ram: str  # default guest RAM (also the Makefile's SMOL_RAM / QWEN_RAM)
    make_assets: str  # the make target that provides `assets`


MODELS: dict[str, ModelSpec] = {
    "smol": ModelSpec("smol", "SmolLM2-135M", "llmrun_smol",
                      cheader.header_string("aisvc.h", "AI_SMOL_DIR"),
                      Path("models/SMOL"), "512M", "smol-assets"),
    # 3G: a Qwen3.5-0.8B is held twice (the resident ai_daemon and llmrun_qwen), and
    # with the vector kernels (QEMU 10) each copy also keeps its repacked rows'
    # multipliers: 2G does not hold the second copy.
    "qwen": ModelSpec("qwen", "Qwen3.5", "llmrun_qwen",
                      cheader.header_string("aisvc.h", "AI_QWEN_DIR"),
                      Path("models/QWEN"), "3G", "qwen-assets"),
}


@functools.cache
def max_prompt() -> int:
    """The most prompt ids per request: AI_MAX_PROMPT in kernel/include/aisvc.h."""
    return cheader.header_define("aisvc.h", "AI_MAX_PROMPT")


@functools.cache
def max_predict() -> int:
    """The most ids one request may generate: AI_MAX_PREDICT in kernel/include/aisvc.h."""
    return cheader.header_define("aisvc.h", "AI_MAX_PREDICT")


@functools.cache
def max_stop() -> int:
    """The most stop ids one request may carry: AI_MAX_STOP in kernel/include/aisvc.h."""
    return cheader.header_define("aisvc.h", "AI_MAX_STOP")


@functools.cache
def max_priority() -> int:
    """The highest priority a request may ask for: AI_PRIO_MAX in kernel/include/aisvc.h."""
    return cheader.header_define("aisvc.h", "AI_PRIO_MAX")


@functools.cache
def max_chunk() -> int:
    """The most positions one worker step may run (aichunk=N): AI_CHUNK_MAX in
    kernel/include/aisvc.h."""
    return cheader.header_define("aisvc.h", "AI_CHUNK_MAX")


@functools.cache
def max_per_process() -> int:
    """The most live requests one process may own: AI_PERPROC in kernel/include/aisvc.h."""
    return cheader.header_define("aisvc.h", "AI_PERPROC")


# The scheduling policies' names (aisched=NAME): the AI_SCHED_ strings of
# kernel/include/aisvc.h, each the name of its kernel/ai/sched_*.c.
POLICIES = cheader.header_strings("aisvc.h", "AI_SCHED_")


@functools.cache
def max_batch() -> int:
    """The most requests the AI worker runs in one forward pass: AI_BATCH in
    kernel/include/aisvc.h (ai_daemon's --batch takes 1..AI_BATCH)."""
    return cheader.header_define("aisvc.h", "AI_BATCH")


# ---------------------------------------------------------------- images

@dataclass(frozen=True)
class Prepared:
    """A bootable kernel and image for one model."""

    kernel: Path
    image: Path
    assets: Path
    size_mb: float  # the assets' total size
    title: str  # what the assets hold, from INFO.TXT (e.g. "Qwen3.5 synthetic (0.8b)")


def _make(root: Path, *targets: str, hint: str = "fix the build first") -> None:
    """Runs `make targets` in root; LlmGuestError with the end of its output and hint when it
    fails."""
    proc = subprocess.run(["make", *targets], cwd=root, capture_output=True, text=True)
    if proc.returncode != 0:
        tail = (proc.stdout + proc.stderr)[-3000:]
        raise LlmGuestError(f"`make {' '.join(targets)}` failed; {hint}:\n{tail}")


def uprogs(root: Path) -> dict[str, Path]:
    """Guest program name -> ELF, from the Makefile's UPROGS."""
    proc = subprocess.run(["make", "-s", "--no-print-directory", "print-UPROGS"], cwd=root,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        raise LlmGuestError(f"`make print-UPROGS` failed: {proc.stderr.strip()}; fix the build")
    return {n: root / "build/user" / f"_{n}" for n in proc.stdout.split()}


def check_assets(root: Path, spec: ModelSpec, assets: Path | None,
                 flag: str = "--assets") -> Path:
    """The asset directory to use; runs `make MODEL-assets` for a missing default one.
    flag is the option of the calling verb that names another directory."""
    if assets is None:
        assets = root / spec.assets
        if not (assets / "INFO.TXT").is_file() and not (assets / "CFG.BIN").is_file():
            _make(root, spec.make_assets, hint="give make what it asks for, or pass another "
                  f"{spec.name} asset directory with {flag} DIR")
    if not (assets / "CFG.BIN").is_file():
        raise LlmGuestError(f"{assets}: no CFG.BIN, so no {spec.title} assets; run "
                            f"`make {spec.make_assets}` (see the Makefile's [models] section) "
                            f"or pass another asset directory with {flag} DIR")
    return assets


def seq_len(assets: Path) -> int:
    """The runtime_seq_len in the asset directory's CFG.BIN."""
    try:
        return load_config((assets / "CFG.BIN").read_bytes()).runtime_seq_len
    except (OSError, AssetError) as e:
        raise LlmGuestError(f"{assets}/CFG.BIN: {e}; re-export the model") from e


def check_request(n_prompt: int, n_new: int, limit: int, new_flag: str) -> None:
    """Raises LlmGuestError when a request breaks a limit the guest runtime enforces: at
    most max_prompt() prompt ids, prompt + new tokens <= limit (runtime_seq_len). The
    message names new_flag, the verb's option for the new tokens."""
    if n_prompt > max_prompt():
        raise LlmGuestError(f"the prompt is {n_prompt} tokens; the runtime takes at most "
                            f"{max_prompt()}: shorten the text")
    if n_prompt + n_new > limit:
        room = limit - n_prompt
        fix = f"lower {new_flag} to at most {room}" if room > 0 else "shorten the text"
        raise LlmGuestError(f"prompt {n_prompt} + {n_new} new tokens = {n_prompt + n_new} "
                            f"exceeds the model's runtime_seq_len {limit}: {fix}")


def prepare(root: Path, spec: ModelSpec, assets: Path | None = None,
            flag: str = "--assets") -> Prepared:
    """Runs ``make kernel uprogs`` (a no-op when up to date), checks the asset
    directory (running the model's make target for a missing default one) and
    builds ``build/bench/fs-MODEL-KEY.img`` with every guest program at /NAME and
    the assets at the model's guest directory. KEY names the asset directory, so
    two asset sets never share an image; the image is rebuilt when its content
    changes (pyaisvc.image.modelimage)."""
    _make(root, "kernel", "uprogs")
    assets = check_assets(root, spec, assets, flag)
    key = hashlib.sha256(str(assets.resolve()).encode()).hexdigest()[:8]
    image = root / IMAGE_DIR / f"fs-{spec.name}-{key}.img"
    build_model_image(image, uprogs(root), {spec.guest_dir.lstrip("/"): assets})
    size_mb = sum(f.stat().st_size for f in assets.iterdir() if f.is_file()) / 1e6
    return Prepared(root / KERNEL, image, assets, size_mb, asset_title(assets, spec.title))


def asset_title(assets: Path, default: str) -> str:
    """INFO.TXT's source model name, or default when there is none."""
    try:
        info = json.loads((assets / "INFO.TXT").read_text())
        return str(info["source"]["model"])
    except (OSError, ValueError, KeyError, TypeError):
        return default


# ---------------------------------------------------------------- requests and replies

def id_args(ids: tuple[int, ...] | list[int]) -> str:
    """The ids as double-quoted shell words of at most ARG_CHARS characters each."""
    words, cur = [], ""
    for i in ids:
        if cur and len(cur) + 1 + len(str(i)) > ARG_CHARS:
            words.append(cur)
            cur = ""
        cur = f"{cur} {i}" if cur else str(i)
    words.append(cur)
    return " ".join(f'"{w}"' for w in words)


_TIMING_VALUES = " ".join(rf"{f}=(\d+)" for f in TIMING_FIELDS)


def timing_pattern(prog: str) -> str:
    """Regex text of prog's timing line; its groups are the TIMING_FIELDS values.
    Fields a later runtime appends (kernels=vector) are matched, not captured."""
    return rf"{re.escape(prog)}: timing {_TIMING_VALUES}(?: \w+=\S+)*"


def timing_fields(m: re.Match[str]) -> dict[str, int]:
    """TIMING_FIELDS -> value, from a match of timing_pattern()."""
    return dict(zip(TIMING_FIELDS, (int(v) for v in m.groups()), strict=True))


def timings(output: str, prog: str | None = None) -> list[dict[str, int]]:
    """Every timing line in output, in order: prog's, or any llmrun program's."""
    who = re.escape(prog) if prog else r"llmrun_\w+"
    # Fields a later runtime appends (e.g. threads=N) follow the fixed ones.
    line = re.compile(rf"^{who}: timing {_TIMING_VALUES}(?: \w+=\S+)*\s*$", re.M)
    return [timing_fields(m) for m in line.finditer(output)]


def cached_positions(output: str, prog: str | None = None) -> list[int]:
    """cached= of every timing line in output that has it: the prompt positions each
    request took from the KV cache (docs/KVCACHE.md)."""
    who = re.escape(prog) if prog else r"llmrun_\w+"
    lines = re.finditer(rf"^{who}: timing .*$", output, re.M)
    return [int(m[1]) for line in lines if (m := re.search(r" cached=(\d+)", line.group(0)))]


def kv_counters(output: str) -> dict[str, int]:
    """The numeric fields of the last KV pool counter line in output (llm_kv_print:
    blocks, used, cached, free, requests, prompt, hits, evictions); {} if none."""
    lines = re.findall(r"^\S+: kvcache (.*)$", output, re.M)
    if not lines:
        return {}
    pairs = (f.split("=", 1) for f in lines[-1].split())
    return {k: int(v) for k, v in pairs if v.isdigit()}


_RAN = re.compile(r" kernels=(\w+) threads=(\d+)\s*$")


def kernels_ran(output: str, prog: str | None = None) -> list[str]:
    """"kernels/threads" (e.g. "vector/2") of every timing line in output that says which
    kernels and how many threads ran; a run that fell back to scalar kernels or to one
    thread shows here."""
    who = re.escape(prog) if prog else r"llmrun_\w+"
    lines = re.finditer(rf"^{who}: timing .*$", output, re.M)
    return [f"{m[1]}/{m[2]}" for line in lines if (m := _RAN.search(line.group(0)))]


def timing_line(prog: str, fields: dict[str, int]) -> str:
    """The timing line as prog prints it."""
    return f"{prog}: timing " + " ".join(f"{k}={fields[k]}" for k in TIMING_FIELDS)


def service_ids(output: str) -> list[int]:
    """The ids `ai gen` printed at the guest's shell (its first line; logprob lines may
    follow); LlmGuestError quoting the output when the service refused the request (an
    "error" line from the tool, or no ids first)."""
    first = output.strip().splitlines()[0] if output.strip() else ""
    if "error" in output or not first.replace(" ", "").isdigit():
        raise LlmGuestError(f"the AI service refused the request: {output.strip()}")
    return [int(v) for v in first.split()]


def parse_output(output: str, prog: str, gen: int) -> tuple[dict[str, int], tuple[int, ...]]:
    """(timing fields, generated ids) from a run's console output; LlmGuestError if absent."""
    found = timings(output, prog)
    ids = [line for line in output.splitlines() if IDS_LINE.match(line.strip())]
    if not found or not ids:
        raise LlmGuestError(f"{prog} printed no ids and timing line; its output was:\n"
                            f"{output[-2000:]}")
    fields = found[-1]
    got = tuple(int(v) for v in ids[-1].split())
    if fields["gen"] != gen or len(got) != gen:
        raise LlmGuestError(f"{prog}: asked for {gen} ids, got {len(got)} (timing says "
                            f"gen={fields['gen']})")
    return fields, got
