"""The sentence encoder behind search by meaning (docs/search.md)."""
