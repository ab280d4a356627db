"""Text <-> token ids: fixed encodings (course facts), round trips, id checking, CLI."""

from __future__ import annotations

import io
import sys

import pytest

from pyaisvc.cli import main
from pyaisvc.model import tokenizer
from pyaisvc.model.tokenizer import TokenizerError, load_smol_from_gguf, load_tokenizer
from pyaisvc.model.translate import TokenIdError, decode_ids, encode_text, parse_ids

PROMPT = "The capital of France is"
EXPECTED = {  # docs/ASSET_FORMAT.md, section 8
    "smol": [504, 3575, 282, 4649, 314],
    "qwen": [760, 6511, 314, 9338, 369],
}
ROUND_TRIP = [
    "The capital of France is",
    "Hello, world! It's 2026; prices rose 3.5% (a lot).",
    "  leading spaces, tabs\tand\nnew lines\n\n",
    "中华人民共和国的首都是北京。",
    "机器学习模型在 QEMU 里运行。",
    "def add(a, b):\n    return a + b  # sum\n",
    "for (int i = 0; i < n; i++) { x[i] = y[i] << 2; }",
    "naïve café – “quotes” — emoji 🙂",
]


@pytest.mark.parametrize("model", ["smol", "qwen"])
def test_course_prompt_encodes_to_the_course_ids(model):
    assert encode_text(PROMPT, model) == EXPECTED[model]


@pytest.mark.parametrize("model", ["smol", "qwen"])
def test_course_ids_decode_to_the_prompt(model):
    assert decode_ids(EXPECTED[model], model) == PROMPT


@pytest.mark.parametrize("model", ["smol", "qwen"])
@pytest.mark.parametrize("text", ROUND_TRIP)
def test_round_trip(model, text):
    ids = encode_text(text, model)
    assert ids and all(isinstance(i, int) for i in ids)
    assert decode_ids(ids, model) == text


def test_vocab_sizes():
    assert load_tokenizer("smol").vocab_size == 49152
    # Qwen3.5's tokenizer covers ids up to its last special token; the model pads to 248320.
    assert 248000 < load_tokenizer("qwen").vocab_size <= 248320


@pytest.mark.parametrize("model", ["smol", "qwen"])
def test_skip_special_tokens(model):
    tok = load_tokenizer(model)
    im_end = tok.encode("<|im_end|>")
    assert len(im_end) == 1  # a special token, encoded as itself
    ids = EXPECTED[model] + im_end
    assert decode_ids(ids, model).endswith("<|im_end|>")
    assert decode_ids(ids, model, skip_special_tokens=True) == PROMPT


@pytest.mark.parametrize("text,msg", [
    ("504 x7 314", "--tokens: item 2 'x7' is not a number"),
    ("504 -3", "--tokens: item 2 -3 is negative"),
    ("504 3.5", "--tokens: item 2 '3.5' is not a number"),
    ("1 2 50000", "--tokens: item 3 50000 is beyond the vocabulary (ids are 0..49151)"),
])
def test_parse_ids_names_the_field(text, msg):
    with pytest.raises(TokenIdError) as e:
        parse_ids(text, "--tokens", vocab_size=49152)
    assert msg in str(e.value)


def test_parse_ids_separators():
    assert parse_ids("[504, 3575,282\n4649 314]\n", "--tokens") == EXPECTED["smol"]
    assert parse_ids("", "--tokens") == []


def test_decode_beyond_vocab_is_refused():
    with pytest.raises(TokenIdError, match="tokens: item 2 49152 is beyond the vocabulary"):
        decode_ids([504, 49152], "smol")
    with pytest.raises(TokenIdError, match="item 1 248320 is beyond"):
        decode_ids([248320], "qwen")


def test_tokenizer_file(tmp_path):
    # A local tokenizer.json (saved from the GGUF tokenizer) gives the same ids.
    path = tmp_path / "tokenizer.json"
    load_smol_from_gguf()._tok.backend_tokenizer.save(str(path))
    assert encode_text(PROMPT, "smol", str(path)) == EXPECTED["smol"]
    assert decode_ids(EXPECTED["smol"], "qwen", str(path)) == PROMPT
    with pytest.raises(TokenizerError, match="--tokenizer-file .*: no such file"):
        encode_text(PROMPT, "smol", str(tmp_path / "missing.json"))
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(TokenizerError, match="not a tokenizer.json"):
        encode_text(PROMPT, "smol", str(tmp_path / "bad.json"))


# ---------------------------------------------------------------- CLI

def _cli(argv, capsys, stdin: str | None = None):
    if stdin is not None:
        old, sys.stdin = sys.stdin, io.StringIO(stdin)
    try:
        rc = main(argv)
    finally:
        if stdin is not None:
            sys.stdin = old
    out, err = capsys.readouterr()
    return rc, out, err


@pytest.mark.parametrize("model", ["smol", "qwen"])
def test_cli_encode_decode(model, capsys):
    rc, out, _ = _cli(["translate", "encode", "--model", model, "--text", PROMPT], capsys)
    assert rc == 0 and out == " ".join(map(str, EXPECTED[model])) + "\n"
    rc, out, _ = _cli(["translate", "decode", "--model", model, "--tokens", out], capsys)
    assert rc == 0 and out == PROMPT + "\n"


def test_cli_files_and_stdin(tmp_path, capsys):
    (tmp_path / "p.txt").write_text(PROMPT + "\n")
    rc, out, _ = _cli(["translate", "encode", "--text-file", str(tmp_path / "p.txt")], capsys)
    assert out.split() == [str(i) for i in EXPECTED["smol"]]
    rc, out, _ = _cli(["translate", "decode", "--model", "qwen", "--token-file", "-"], capsys,
                      stdin="760 6511 314 9338 369\n")
    assert rc == 0 and out == PROMPT + "\n"


def test_cli_bad_ids_exit_1_naming_the_field(tmp_path, capsys):
    rc, out, err = _cli(["translate", "decode", "--tokens", "504 abc"], capsys)
    assert rc == 1 and out == ""
    assert "pyaisvc translate: --tokens: item 2 'abc' is not a number" in err
    (tmp_path / "ids").write_text("1 2 -5")
    rc, _, err = _cli(["translate", "decode", "--token-file", str(tmp_path / "ids")], capsys)
    assert rc == 1 and "--token-file: item 3 -5 is negative" in err
    rc, _, err = _cli(["translate", "decode", "--token-file", str(tmp_path / "nope")], capsys)
    assert rc == 1 and "--token-file" in err and "nope" in err


# ---------------------------------------------------------------- the tokenizer cache

def test_cached_smol_tokenizer_equals_the_gguf_one(tmp_path, monkeypatch):
    monkeypatch.setenv("AISVC_CACHE", str(tmp_path))
    load_tokenizer.cache_clear()
    try:
        cached = load_tokenizer("smol")
        entry = tokenizer.smol_cache_dir(tokenizer.default_gguf())
        assert entry.parent.parent == tmp_path and (entry / "tokenizer.json").is_file()
        gguf = load_smol_from_gguf()
        assert type(cached) is not type(gguf)  # really read from the cache
        text = "\n".join(ROUND_TRIP) + " <|im_start|>user\nhi<|im_end|>"
        ids = gguf.encode(text)
        assert cached.encode(text) == ids and cached.vocab_size == gguf.vocab_size
        every = list(range(0, gguf.vocab_size, 7)) + [0, 1, 2]
        for skip in (False, True):
            assert cached.decode(ids, skip) == gguf.decode(ids, skip)
            assert cached.decode(every, skip) == gguf.decode(every, skip)
        assert cached.chat_template == gguf.chat_template and cached.chat_template
    finally:
        load_tokenizer.cache_clear()


def test_tokenizer_cache_is_keyed_by_the_model_files_content(tmp_path, monkeypatch):
    monkeypatch.setenv("AISVC_CACHE", str(tmp_path))
    a, b = tmp_path / "a.gguf", tmp_path / "b.gguf"
    a.write_bytes(b"GGUF one")
    b.write_bytes(b"GGUF one")
    assert tokenizer.smol_cache_dir(a) == tokenizer.smol_cache_dir(b)
    b.write_bytes(b"GGUF two")
    assert tokenizer.smol_cache_dir(a) != tokenizer.smol_cache_dir(b)
