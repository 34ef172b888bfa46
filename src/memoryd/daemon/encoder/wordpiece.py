"""BERT's WordPiece tokenizer from the model's own `tokenizer.json`, giving the `tokenizers` package's
ids (tests/unit/test_wordpiece.py; what it does and why ours: docs/search.md, "The tokenizer")."""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterator

_ASCII_PUNCTUATION = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
# Dropped as controls; unassigned code points (Cn) are not: the model's tokenizer keeps them.
_CONTROLS = frozenset({"Cc", "Cf", "Co", "Cs"})
_CJK = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),
        (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))


# ASCII text takes a shortcut with the same result: controls out, runs of letters and digits, punctuation.
_ASCII_CLEAN = {code: None for code in [*range(32), 127] if code not in (9, 10, 13)} | {9: " ", 10: " ", 13: " "}
_ASCII_WORD = re.compile(r"[a-z0-9]+|[^\sa-z0-9]")
# Cut only at these: other whitespace (U+001C) is a control the normalizer drops, inside a word.
_CUT_AT = " \t\n\r"
_SPACE = re.compile("[ \t\n\r]")
CHUNK_CHARS = 4096


def _clean(text: str) -> str:
    """Controls out, whitespace to spaces, CJK ideographs spaced apart, accents stripped, lowercased."""
    out = []
    for char in text:
        if char == "\ufffd" or (unicodedata.category(char) in _CONTROLS and char not in "\t\n\r"):
            continue
        if char.isspace():
            out.append(" ")
        elif any(low <= ord(char) <= high for low, high in _CJK):  # a CJK ideograph
            out.append(f" {char} ")
        else:
            out.append(char)
    decomposed = unicodedata.normalize("NFD", "".join(out))
    # char by char: str.lower() would turn a word's final capital sigma into ς, the model's tokenizer does not
    return "".join(c.lower() for c in decomposed if unicodedata.category(c) != "Mn")


def _words(text: str) -> list[str]:
    words: list[str] = []
    for chunk in text.split():
        start = 0
        for i, char in enumerate(chunk):
            if char in _ASCII_PUNCTUATION or unicodedata.category(char).startswith("P"):
                if start < i:
                    words.append(chunk[start:i])
                words.append(char)
                start = i + 1
        if start < len(chunk):
            words.append(chunk[start:])
    return words


def _chunks(text: str, size: int = CHUNK_CHARS) -> Iterator[str]:
    """`text` in pieces of about `size` chars, each cut just after whitespace: the same ids as the whole."""
    start = 0
    while start < len(text):
        end = start + size
        if end >= len(text):
            yield text[start:]
            return
        back = max(text.rfind(space, start, end) for space in _CUT_AT)
        if back >= 0:
            cut = back + 1
        else:
            match = _SPACE.search(text, end)
            cut = match.end() if match else len(text)
        yield text[start:cut]
        start = cut


class WordPiece:
    """Text → token ids, `[CLS]` first and `[SEP]` last, cut to `max_tokens` in all."""

    def __init__(self, vocab: dict[str, int], specials: dict[str, int], unknown: str, prefix: str,
                 max_word_chars: int, max_tokens: int) -> None:
        self.vocab, self.specials, self.prefix = vocab, specials, prefix
        self.unknown, self.max_word_chars, self.max_tokens = vocab[unknown], max_word_chars, max_tokens
        self.first, self.last = vocab["[CLS]"], vocab["[SEP]"]
        self._special_re = re.compile("(" + "|".join(re.escape(s) for s in specials) + ")") if specials else None

    @classmethod
    def from_json(cls, text: str, max_tokens: int) -> WordPiece:
        spec = json.loads(text)
        model = spec["model"]
        specials = {t["content"]: t["id"] for t in spec.get("added_tokens", []) if t.get("special")}
        return cls(model["vocab"], specials, model["unk_token"], model["continuing_subword_prefix"],
                   model["max_input_chars_per_word"], max_tokens)

    def encode(self, text: str) -> list[int]:
        ids: list[int] = []
        parts = self._special_re.split(text) if self._special_re else [text]
        for i, part in enumerate(parts):
            if i % 2:  # a special token written in the text
                ids.append(self.specials[part])
                continue
            for chunk in _chunks(part):
                if len(ids) >= self.max_tokens - 2:
                    break
                words = (_ASCII_WORD.findall(chunk.translate(_ASCII_CLEAN).lower()) if chunk.isascii()
                         else _words(_clean(chunk)))
                for word in words:
                    ids.extend(self._pieces(word))
        return [self.first, *ids[:self.max_tokens - 2], self.last]

    def _pieces(self, word: str) -> list[int]:
        if len(word) > self.max_word_chars:
            return [self.unknown]
        pieces, start = [], 0
        while start < len(word):
            for end in range(len(word), start, -1):
                piece = word[start:end] if start == 0 else self.prefix + word[start:end]
                if piece in self.vocab:
                    pieces.append(self.vocab[piece])
                    start = end
                    break
            else:
                return [self.unknown]
        return pieces
