"""Our WordPiece tokenizer gives the ids the `tokenizers` package gives for the model's own
tokenizer.json (no padding, cut at the encoder's MAX_TOKENS): on every text of the eval sets, on
hostile text (controls, unassigned code points, accents, CJK, literal special tokens, long words)
and on thousands of random strings, ASCII and not. Vectors saved by either are then the same."""

from __future__ import annotations

import random
import zipfile
from importlib import resources
from pathlib import Path

import pytest
import yaml
from tests.harness import ensure_model

from memoryd.daemon.encoder import model as encoder
from memoryd.daemon.encoder import wordpiece
from memoryd.daemon.encoder.wordpiece import WordPiece

HOSTILE = [
    "", "   ", "[CLS] hello [SEP]world[MASK]x", "naïve café résumé ÉCOLE", "ΟΔΟΣ ΣΟΦΟΣ Σ", "İstanbul ǅ ß ﬁ",
    "中文字符测试 and 日本語のテキスト 한국어", "emoji 😀👍🏽 done",
    "a\x1cb c\x00d e\ufffdf g\u200bh i\u2028j k\u00a0l m\u3000n",
    "unassigned \u0378 and \u038b inside wo\u0378rds", "x" * 150, "super" + "califragilistic" * 8,
    "tab\tnew\nline\rret\x0bvt\x0cff\x7fdel", "https://example.com/a_b-c?d=e&f=g#h",
    "`foo.bar()` --flag ALL_CAPS snake_case camelCase", "word " * 400, "مرحبا بالعالم", "\u0301\u0301 combining first",
    "¿¡«»—–…“”‘’", "1,000.50 $ € £ ¥ 100%", "private \ue000 use, BOM \ufeff, joiner a\u200db",
]


def eval_texts() -> list[str]:
    folder = resources.files("memoryd.eval")
    recall = yaml.safe_load(folder.joinpath("recall_set.yaml").read_text())
    typed = yaml.safe_load(folder.joinpath("prompts_typed.yaml").read_text())
    return ([m["content"] for m in recall["memories"]] + [q["q"] for q in recall["queries"]]
            + [p["prompt"] for p in typed["prompts"]])


def random_texts(count: int) -> list[str]:
    rng = random.Random(1)
    pool = [chr(c) for c in [*range(32, 127), *range(0xA0, 0x250), *range(0x370, 0x400), *range(0x4E00, 0x4E40),
                             0x2028, 0x2029, 0x85, 0x0B, 0x0C, 0x200D, 0xFEFF, 0x1F600, 0xE000]]
    mixed = ["".join(rng.choice(pool) for _ in range(rng.randint(0, 80))) for _ in range(count)]
    ascii_only = ["".join(chr(rng.randrange(128)) for _ in range(rng.randint(0, 60))) for _ in range(count)]
    return mixed + ascii_only


@pytest.fixture(scope="module")
def tokenizers() -> tuple[WordPiece, object]:
    reference = pytest.importorskip("tokenizers")  # a test extra: the README's test command installs it
    ensure_model()
    with zipfile.ZipFile(encoder.model_zip()) as archive:
        spec = archive.read("tokenizer.json").decode()
    theirs = reference.Tokenizer.from_str(spec)
    theirs.no_padding()
    theirs.enable_truncation(encoder.MAX_TOKENS)
    return WordPiece.from_json(spec, encoder.MAX_TOKENS), theirs


@pytest.mark.parametrize("source", ["eval sets", "hostile", "random"])
def test_ids_equal_the_reference_tokenizers(tokenizers: tuple[WordPiece, object], source: str) -> None:
    ours, theirs = tokenizers
    texts = {"eval sets": eval_texts, "hostile": lambda: HOSTILE, "random": lambda: random_texts(1500)}[source]()
    differ = [t for t in texts if ours.encode(t) != theirs.encode(t).ids]  # type: ignore[attr-defined]
    assert not differ, f"{len(differ)} of {len(texts)} differ, e.g. {differ[:3]!r}"


def test_a_long_text_is_cut_to_max_tokens_with_its_markers(tokenizers: tuple[WordPiece, object]) -> None:
    ids = tokenizers[0].encode("word " * 400)
    assert len(ids) == encoder.MAX_TOKENS and ids[0] == 101 and ids[-1] == 102


def test_a_tokenizer_that_is_not_the_pinned_one_is_refused(tmp_path: Path) -> None:
    ensure_model()
    fake = tmp_path / "model.zip"
    with zipfile.ZipFile(encoder.model_zip()) as real, zipfile.ZipFile(fake, "w") as archive:
        archive.writestr("model.safetensors", real.read("model.safetensors"))
        archive.writestr("tokenizer.json", real.read("tokenizer.json").replace(b'"[UNK]":100', b'"[UNK]":101'))
    with pytest.raises(encoder.EncoderUnavailable, match="tokenizer sha256"):
        encoder.Encoder.load(fake)


def long_texts() -> list[str]:
    """Texts of several pieces (`wordpiece.CHUNK_CHARS`), with controls, marks and whitespace of
    every kind near the cuts, and heads of blank or dropped characters before the first word."""
    rng = random.Random(2)
    pool = random_texts(400)
    texts = [" ".join(rng.sample(pool, 300)) for _ in range(6)]
    texts += ["\x1c".join(rng.sample(pool, 300)), "\u0301 ".join(rng.sample(pool, 300)), "-" * 9000 + " tail words",
              " " * 9000 + "late start", "\x00" * 9000 + "after controls", "é" * 5000 + " " + "ü" * 5000 + " end",
              "\u2028".join(rng.sample(pool, 300)), "ab\x1c" * 5000 + " end", "ab\u2028" * 5000 + " end"]
    return texts


def test_long_texts_give_the_reference_ids_piece_by_piece(tokenizers: tuple[WordPiece, object]) -> None:
    ours, theirs = tokenizers
    for text in long_texts():
        assert len(text) > 2 * wordpiece.CHUNK_CHARS
        assert ours.encode(text) == theirs.encode(text).ids, repr(text[:80])  # type: ignore[attr-defined]


def test_a_huge_text_is_tokenized_only_as_far_as_the_model_reads(tokenizers: tuple[WordPiece, object],
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    cleaned: list[int] = []
    clean = wordpiece._clean
    monkeypatch.setattr(wordpiece, "_clean", lambda text: cleaned.append(len(text)) or clean(text))
    ids = tokenizers[0].encode("naïve résumé " * 300_000)  # 3.9M chars, not ASCII
    assert len(ids) == encoder.MAX_TOKENS
    assert sum(cleaned) <= 2 * wordpiece.CHUNK_CHARS
