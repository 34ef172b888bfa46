"""The sentence encoder behind search by meaning: its verified files (`files`), its tokenizer
(`wordpiece`) and the numpy forward pass (`model`). Design: docs/search.md."""
